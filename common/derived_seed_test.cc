#include "common/derived_seed.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Published FNV-1a test vectors.
TEST(Fnv1a64, MatchesReferenceVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

// Fixed values: a checkpoint restored by another build must derive the same
// seeds, so any change to the derivation has to show up here.
TEST(DeriveSeed, IsStableAcrossBuilds) {
  EXPECT_EQ(DeriveSeed(0, ""), 0x5b21f68ffa77f14cULL);
  EXPECT_EQ(DeriveSeed(42, "conv2d/kernel"), 0xa17cca1cec72616eULL);
  EXPECT_EQ(DeriveSeed(42, "conv2d/bias"), 0xf73f3f45e3f1f1e2ULL);
  EXPECT_EQ(DeriveSeed(7, "dense_1/kernel"), 0x270b9e80db75318ULL);
}

TEST(DeriveSeed, DistinctLabelsAndRunSeedsGiveDistinctSeeds) {
  std::set<uint64_t> seeds;
  int count = 0;
  for (uint64_t run_seed : {0ULL, 1ULL, 2ULL, ~0ULL}) {
    for (const std::string label :
         {"conv2d/kernel", "conv2d/bias", "conv2d_1/kernel", "dense/kernel",
          "dense_1/kernel", "dense_1/bias", ""}) {
      seeds.insert(DeriveSeed(run_seed, label));
      ++count;
    }
  }
  EXPECT_EQ(seeds.size(), static_cast<size_t>(count));
}

}  // namespace
}  // namespace pstrain

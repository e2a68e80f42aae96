#include "compute/rng_tracker.h"

#include <set>

#include "common/derived_seed.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace {

TEST(RngTracker, GlobalSeedIsTheSameOnEveryReplica) {
  const RngTracker first(42, 0);
  for (int replica : {1, 2, 7, 1000}) {
    const RngTracker other(42, replica);
    EXPECT_EQ(other.GlobalSeed("dropout"), first.GlobalSeed("dropout"))
        << replica;
    EXPECT_EQ(other.GlobalSeed("dropout_1"), first.GlobalSeed("dropout_1"))
        << replica;
  }
}

TEST(RngTracker, LocalSeedDiffersBetweenReplicas) {
  std::set<uint64_t> seeds;
  for (int replica = 0; replica < 64; ++replica) {
    seeds.insert(RngTracker(42, replica).LocalSeed("dropout"));
  }
  EXPECT_EQ(seeds.size(), 64u);
}

TEST(RngTracker, SeedsAreDeterministicFunctionsOfRunSeedAndName) {
  const RngTracker a(7, 3);
  const RngTracker b(7, 3);
  EXPECT_EQ(a.GlobalSeed("dropout"), b.GlobalSeed("dropout"));
  EXPECT_EQ(a.LocalSeed("dropout"), b.LocalSeed("dropout"));
  // The documented derivations, pinned: a restored run must draw the same.
  EXPECT_EQ(a.GlobalSeed("dropout"), DeriveSeed(7, "rng/global/dropout"));
  EXPECT_EQ(a.LocalSeed("dropout"), DeriveSeed(7, "rng/local/3/dropout"));
}

TEST(RngTracker, SeedsDifferByNameKindAndRunSeed) {
  const RngTracker rng(7, 0);
  std::set<uint64_t> seeds = {
      rng.GlobalSeed("dropout"),
      rng.GlobalSeed("dropout_1"),
      rng.LocalSeed("dropout"),
      rng.LocalSeed("dropout_1"),
      RngTracker(8, 0).GlobalSeed("dropout"),
      RngTracker(8, 0).LocalSeed("dropout"),
      // Nor do they collide with variable initializer seeds of the same
      // label.
      DeriveSeed(7, "dropout"),
  };
  EXPECT_EQ(seeds.size(), 7u);
}

TEST(DropoutElementOffset, IsExampleOffsetTimesFeatures) {
  EXPECT_EQ(DropoutElementOffset(0, 200), 0u);
  EXPECT_EQ(DropoutElementOffset(4, 200), 800u);
  // Row r, element e of a batch starting at example 4 sits at
  // (4 + r) * 200 + e.
  EXPECT_EQ(DropoutElementOffset(4, 200) + 2 * 200 + 5, (4u + 2) * 200 + 5);
}

}  // namespace
}  // namespace worker
}  // namespace pstrain

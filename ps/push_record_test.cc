#include "ps/push_record.h"

#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "proto/ps_service.pb.h"

namespace pstrain {
namespace ps {
namespace {

TEST(PushRecord, ReservedPushIsAnsweredAsAppliedUntilSet) {
  PushRecord<int, PushDenseResponse> record;
  EXPECT_FALSE(record.Find(0, 7).has_value());
  EXPECT_FALSE(record.Reserve(0, 7, /*version=*/4).has_value());

  std::optional<PushDenseResponse> pending = record.Find(0, 7);
  ASSERT_TRUE(pending.has_value());
  EXPECT_EQ(pending->version(), 5);
  EXPECT_TRUE(pending->applied());
  // A second copy is answered, not reserved again.
  ASSERT_TRUE(record.Reserve(0, 7, 4).has_value());

  PushDenseResponse refused;
  refused.set_version(4);
  refused.set_applied(false);
  record.Set(0, 7, refused);
  EXPECT_EQ(record.Find(0, 7)->version(), 4);
  EXPECT_FALSE(record.Find(0, 7)->applied());
}

TEST(PushRecord, SendersAreKeptApartAndOnlyTheLatestAreKept) {
  PushRecord<std::pair<int, std::string>, PushSparseResponse> record;
  const std::pair<int, std::string> a(0, "emb"), b(1, "emb");
  for (uint64_t key = 1; key <= PushRecord<int, PushDenseResponse>::kKept + 1;
       ++key) {
    EXPECT_FALSE(record.Reserve(a, key, 0).has_value());
  }
  EXPECT_FALSE(record.Find(a, 1).has_value());  // The oldest went.
  EXPECT_TRUE(record.Find(a, 2).has_value());
  EXPECT_FALSE(record.Find(b, 2).has_value());

  record.Clear();
  EXPECT_FALSE(record.Find(a, 2).has_value());
}

}  // namespace
}  // namespace ps
}  // namespace pstrain

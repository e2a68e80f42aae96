#include "compute/id_remap.h"

#include <cstdint>
#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace {

TEST(IdRemap, NumbersDistinctIdsInOrderFirstSeen) {
  const int64_t big = int64_t{1} << 40;
  const std::vector<int64_t> ids = {big + 7, 3, big + 7, INT64_MAX, 3, -5};
  IdRemap remap(ids.size());
  std::vector<int64_t> rows;
  for (int64_t id : ids) {
    absl::StatusOr<int64_t> row = remap.Insert(id);
    ASSERT_TRUE(row.ok()) << row.status();
    rows.push_back(*row);
  }
  EXPECT_EQ(rows, (std::vector<int64_t>{0, 1, 0, 2, 1, 3}));
  EXPECT_EQ(remap.size(), 4);
  ASSERT_EQ(remap.ids().size(), 4u);
  // Each local row maps back to the id it was given for.
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(remap.ids()[rows[i]], ids[i]) << i;
    EXPECT_EQ(remap.Find(ids[i]), rows[i]) << i;
  }
  EXPECT_EQ(remap.Find(12345), -1);
}

TEST(IdRemap, ManyIdsAboveTwoToThe31GetDenseRows) {
  // 1000 ids far above 2^31, each repeated: rows are exactly 0..999.
  IdRemap remap(1000);
  std::map<int64_t, int64_t> expected;
  for (int repeat = 0; repeat < 3; ++repeat) {
    for (int64_t i = 0; i < 1000; ++i) {
      const int64_t id = (int64_t{1} << 33) * (i + 1) + 11;
      absl::StatusOr<int64_t> row = remap.Insert(id);
      ASSERT_TRUE(row.ok());
      auto [it, added] = expected.emplace(id, *row);
      EXPECT_EQ(it->second, *row);
      if (added) EXPECT_EQ(*row, i);
    }
  }
  EXPECT_EQ(remap.size(), 1000);
}

TEST(IdRemap, RefusesMoreDistinctIdsThanItsCapacity) {
  IdRemap remap(2);
  ASSERT_TRUE(remap.Insert(10).ok());
  ASSERT_TRUE(remap.Insert(20).ok());
  EXPECT_EQ(*remap.Insert(10), 0);  // Seen: still fine.
  absl::StatusOr<int64_t> third = remap.Insert(30);
  EXPECT_TRUE(absl::IsResourceExhausted(third.status()));
  EXPECT_NE(third.status().message().find("more than 2"), std::string::npos)
      << third.status();
  EXPECT_EQ(remap.size(), 2);
}

TEST(IdRemap, ClearStartsAStep) {
  IdRemap remap(2);
  ASSERT_TRUE(remap.Insert(10).ok());
  ASSERT_TRUE(remap.Insert(20).ok());
  remap.Clear();
  EXPECT_EQ(remap.size(), 0);
  EXPECT_EQ(remap.Find(10), -1);
  EXPECT_EQ(*remap.Insert(20), 0);
}

TEST(IdRemap, LargeStepsAfterClearNumberFromZeroAndForgetTheLastStep) {
  // Steps of more ids than a small map holds (the map is kept sized for
  // them across Clear).
  IdRemap remap(5000);
  for (int step = 0; step < 3; ++step) {
    for (int64_t i = 0; i < 4000; ++i) {
      ASSERT_EQ(*remap.Insert(step * 100000 + i * 7), i);
      ASSERT_EQ(*remap.Insert(step * 100000 + i * 7), i);  // seen: same row
    }
    ASSERT_EQ(remap.size(), 4000);
    remap.Clear();
    EXPECT_EQ(remap.size(), 0);
    EXPECT_EQ(remap.Find(step * 100000), -1);
  }
}

TEST(IdRemap, AStepSeesOnlyItsOwnIdsWhereTheLastStepsCollide) {
  // Ids 0..2999 fill most slots of the table in step 1; step 2 inserts every
  // third of them in reverse, with 0 among them (the value an unused slot
  // holds), and new ones: rows follow step 2's order, and step 1's other ids
  // are not found however their probes ran.
  IdRemap remap(3000);
  for (int64_t id = 0; id < 3000; ++id) ASSERT_EQ(*remap.Insert(id), id);
  remap.Clear();
  std::vector<int64_t> step;
  for (int64_t id = 2999; id >= 0; id -= 3) step.push_back(id - 2);
  for (int64_t id = 5000; id < 5100; ++id) step.push_back(id);
  for (size_t row = 0; row < step.size(); ++row) {
    ASSERT_EQ(*remap.Insert(step[row]), static_cast<int64_t>(row));
  }
  EXPECT_EQ(remap.ids(), absl::MakeConstSpan(step));
  for (int64_t id = 0; id < 3000; ++id) {
    EXPECT_EQ(remap.Find(id) >= 0, id % 3 == 0) << id;
  }
}

TEST(TableKey, ClearsOnlyTheSignBit) {
  EXPECT_EQ(TableKey(5), 5);
  EXPECT_EQ(TableKey(INT64_MAX), INT64_MAX);
  EXPECT_EQ(TableKey(-1), INT64_MAX);
  EXPECT_EQ(TableKey(INT64_MIN), 0);
  EXPECT_EQ(TableKey(INT64_MIN + 9), 9);
  const uint64_t bits = 0x9e3779b97f4a7c15ull;  // A uint64 id above 2^63.
  EXPECT_EQ(TableKey(static_cast<int64_t>(bits)),
            static_cast<int64_t>(bits & 0x7fffffffffffffffull));
}

}  // namespace
}  // namespace worker
}  // namespace pstrain

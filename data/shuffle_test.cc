#include "data/shuffle.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

TEST(EpochPermutation, IsAPermutation) {
  for (int64_t n : {1, 2, 7, 1000}) {
    std::vector<int64_t> order = EpochPermutation(n, 42, 3);
    std::sort(order.begin(), order.end());
    EXPECT_EQ(order, Iota(n)) << n;
  }
  EXPECT_TRUE(EpochPermutation(0, 42, 3).empty());
}

TEST(EpochPermutation, SameSeedAndEpochGiveSameOrder) {
  EXPECT_EQ(EpochPermutation(10000, 7, 5), EpochPermutation(10000, 7, 5));
}

TEST(EpochPermutation, EpochsAndSeedsGiveDifferentOrders) {
  const std::vector<int64_t> base = EpochPermutation(1000, 7, 0);
  EXPECT_NE(base, Iota(1000));
  EXPECT_NE(EpochPermutation(1000, 7, 1), base);
  EXPECT_NE(EpochPermutation(1000, 8, 0), base);
  // Seed and epoch are not interchangeable.
  EXPECT_NE(EpochPermutation(1000, 1, 0), EpochPermutation(1000, 0, 1));
}

// The order is part of the run's contract (resumed runs, workers built with
// different standard libraries): pinned here so any change is deliberate.
TEST(EpochPermutation, OrderIsPinned) {
  EXPECT_EQ(EpochPermutation(12, 42, 0),
            (std::vector<int64_t>{6, 7, 3, 11, 1, 10, 4, 2, 0, 5, 8, 9}));
  EXPECT_EQ(EpochPermutation(12, 42, 1),
            (std::vector<int64_t>{2, 1, 7, 0, 9, 11, 3, 6, 10, 4, 8, 5}));
}

// Each of the 6 orders of 3 elements comes up about equally often.
TEST(EpochPermutation, OrdersAreUniform) {
  std::vector<int> counts(6);
  const std::vector<std::vector<int64_t>> orders = {
      {0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int64_t epoch = 0; epoch < 6000; ++epoch) {
    const std::vector<int64_t> order = EpochPermutation(3, 1, epoch);
    ++counts[std::find(orders.begin(), orders.end(), order) - orders.begin()];
  }
  for (int count : counts) {
    EXPECT_GT(count, 850);  // Mean 1000, standard deviation about 29.
    EXPECT_LT(count, 1150);
  }
}

}  // namespace
}  // namespace data
}  // namespace pstrain

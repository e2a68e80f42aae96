#include "parallel/split_columns.h"

#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "parallel/local_group_collective.h"

namespace pstrain {
namespace parallel {
namespace {

TEST(SplitColumns, TakeThenGatherGivesTheWholeBack) {
  // [3 rows, 6 columns] split among 3 members, 2 columns each.
  std::vector<float> whole(18);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = float(i);
  std::vector<float> slice(6);
  TakeColumns(whole.data(), 3, 6, 2, 2, slice.data());
  EXPECT_EQ(slice, (std::vector<float>{2, 3, 8, 9, 14, 15}));

  LocalGroup group(3);
  std::vector<std::vector<float>> gathered(3, std::vector<float>(18, -1));
  std::vector<absl::Status> status(3);
  std::vector<std::thread> threads;
  for (int k = 0; k < 3; ++k) {
    threads.emplace_back([&, k] {
      std::unique_ptr<GroupCollective> member = group.Member(k);
      std::vector<float> mine(6), scratch;
      TakeColumns(whole.data(), 3, 6, 2 * k, 2, mine.data());
      status[k] = GatherColumns(member.get(), mine.data(), 3, 2, &scratch,
                                gathered[k].data());
    });
  }
  for (std::thread& t : threads) t.join();
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(status[k].ok()) << status[k];
    EXPECT_EQ(gathered[k], whole) << "member " << k;
  }
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain

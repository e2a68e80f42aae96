#include "parallel/variable_slice.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace parallel {
namespace {

MemberVariable Var(std::vector<int64_t> shape, int split_dim, int64_t begin,
                   int64_t end) {
  MemberVariable var;
  var.shape = shape;
  var.local_shape = shape;
  var.split_dim = split_dim;
  var.begin = begin;
  var.end = end;
  if (split_dim >= 0) var.local_shape[split_dim] = end - begin;
  return var;
}

TEST(VariableSlice, ColumnsOfAKernel) {
  // [3, 4] = 0..11; columns [2, 4).
  std::vector<float> whole(12);
  std::iota(whole.begin(), whole.end(), 0.0f);
  const MemberVariable var = Var({3, 4}, 1, 2, 4);
  std::vector<float> part(var.local_elements());
  CopySliceOut(whole.data(), var, part.data());
  EXPECT_EQ(part, (std::vector<float>{2, 3, 6, 7, 10, 11}));
  std::vector<float> back(12, -1.0f);
  CopySliceIn(part.data(), var, back.data());
  EXPECT_EQ(back, (std::vector<float>{-1, -1, 2, 3, -1, -1, 6, 7, -1, -1, 10,
                                      11}));
}

TEST(VariableSlice, RowsOfAKernelAndMiddleDimensionOfRankThree) {
  std::vector<float> whole(12);
  std::iota(whole.begin(), whole.end(), 0.0f);
  const MemberVariable rows = Var({3, 4}, 0, 1, 2);
  std::vector<float> part(4);
  CopySliceOut(whole.data(), rows, part.data());
  EXPECT_EQ(part, (std::vector<float>{4, 5, 6, 7}));
  // [2, 3, 2]: dimension 1, [1, 3): per outer block, elements 2..5.
  const MemberVariable middle = Var({2, 3, 2}, 1, 1, 3);
  std::vector<float> mid(8);
  CopySliceOut(whole.data(), middle, mid.data());
  EXPECT_EQ(mid, (std::vector<float>{2, 3, 4, 5, 8, 9, 10, 11}));
}

TEST(VariableSlice, ReplicatedPartIsTheWhole) {
  std::vector<float> whole = {1, 2, 3};
  const MemberVariable var = Var({3}, -1, 0, 0);
  std::vector<float> part(3);
  CopySliceOut(whole.data(), var, part.data());
  EXPECT_EQ(part, whole);
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain

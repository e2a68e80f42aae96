#include "compute/cpu/embedding.h"

#include <string>
#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

EmbeddingShape Shape(int64_t ids, int64_t input_dim, int64_t output_dim) {
  EmbeddingShape shape;
  shape.ids = ids;
  shape.input_dim = input_dim;
  shape.output_dim = output_dim;
  return shape;
}

TEST(EmbeddingForward, GathersTheRowsOfTheIds) {
  // Table row r is {10 r, 10 r + 1}.
  const std::vector<float> table = {0, 1, 10, 11, 20, 21, 30, 31};
  const std::vector<int32_t> ids = {2, 0, 2, 3};
  std::vector<float> y(8, -1.0f);
  ASSERT_TRUE(
      EmbeddingForward(Shape(4, 4, 2), ids.data(), table.data(), y.data())
          .ok());
  EXPECT_EQ(y, (std::vector<float>{20, 21, 0, 1, 20, 21, 30, 31}));
}

TEST(EmbeddingBackward, ScatterAddsIntoAFullSizeZeroedGradient) {
  const std::vector<int32_t> ids = {2, 0, 2};
  const std::vector<float> dy = {1, 2, 3, 4, 5, 6};
  std::vector<float> dtable(8, 99.0f);  // Stale values must be overwritten.
  ASSERT_TRUE(
      EmbeddingBackward(Shape(3, 4, 2), ids.data(), dy.data(), dtable.data())
          .ok());
  // Row 2 gets rows 0 and 2 of dy; rows 1 and 3 are named by no id.
  EXPECT_EQ(dtable, (std::vector<float>{3, 4, 0, 0, 6, 8, 0, 0}));
}

TEST(EmbeddingForward, GathersRowsOfEveryWidth) {
  // The widths with a loop of their own and others, against a plain gather.
  for (const int64_t width : {1, 8, 16, 17, 32}) {
    const std::vector<float> table = RandomFloats(5 * width, 3);
    const std::vector<int32_t> ids = {4, 0, 4, 2, 1, 3, 3};
    std::vector<float> y(ids.size() * width, -1.0f), expected;
    for (const int32_t id : ids) {
      expected.insert(expected.end(), table.begin() + id * width,
                      table.begin() + (id + 1) * width);
    }
    ASSERT_TRUE(
        EmbeddingForward(Shape(7, 5, width), ids.data(), table.data(), y.data())
            .ok());
    EXPECT_EQ(y, expected) << "width " << width;
  }
}

TEST(EmbeddingBackward, GradientMatchesFiniteDifferences) {
  const EmbeddingShape shape = Shape(6, 5, 3);
  const std::vector<int32_t> ids = {4, 1, 1, 0, 4, 4};
  std::vector<float> table = RandomFloats(15, 1);
  const std::vector<float> r = RandomFloats(18, 2);
  std::vector<float> y(18), dtable(15);
  auto loss = [&]() {
    EXPECT_TRUE(
        EmbeddingForward(shape, ids.data(), table.data(), y.data()).ok());
    return Dot(y, r);
  };
  ASSERT_TRUE(
      EmbeddingBackward(shape, ids.data(), r.data(), dtable.data()).ok());
  EXPECT_TRUE(GradientsClose(
      dtable, NumericGradient(loss, table.data(), 15, 1e-3), 1e-2));
}

TEST(EmbeddingForward, RefusesIdsOutsideTheTableAndWritesNothing) {
  const std::vector<float> table(8, 1.0f);
  std::vector<float> y(4, -1.0f);
  for (int32_t bad : {-1, 4}) {
    const std::vector<int32_t> ids = {0, bad};
    absl::Status status =
        EmbeddingForward(Shape(2, 4, 2), ids.data(), table.data(), y.data());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("position 1"), std::string::npos) << status;
    EXPECT_EQ(y, std::vector<float>(4, -1.0f));
    std::vector<float> dtable(8, 5.0f);
    EXPECT_EQ(
        EmbeddingBackward(Shape(2, 4, 2), ids.data(), y.data(), dtable.data())
            .code(),
        absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

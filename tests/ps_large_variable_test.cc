// A 1 GiB variable travels through the ps in chunks, whole on one ps task
// and row-partitioned over two: no message comes near protobuf's or gRPC's
// 2 GB limits.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/ps_cluster.h"

namespace pstrain {
namespace testing {
namespace {

constexpr int64_t kRows = 256 << 10;  // [262144, 1024] float32 = 1 GiB
constexpr int64_t kCols = 1024;

void PushAndPull(int num_ps, PlacementOptions options) {
  PsCluster cluster;
  ASSERT_TRUE(cluster.Start(num_ps).ok());
  const std::vector<VariableDef> model = {
      ConstantVariable("embedding/table", {kRows, kCols}, 1.0f)};
  auto client = cluster.Connect("run-1", 0, model, options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(
      (*client)->CreateVariables(Sgd(0.5), Update(UpdateConfig::ASYNC, 1)).ok());

  absl::StatusOr<Tensor> tensor = Tensor::Create(DT_FLOAT, {kRows, kCols});
  ASSERT_TRUE(tensor.ok());
  ASSERT_EQ(tensor->num_bytes(), size_t{1} << 30);
  float* data = tensor->data<float>();
  for (int64_t i = 0; i < kRows * kCols; ++i) data[i] = (i % 7) * 0.25f;
  const std::map<std::string, Tensor*> map = {{"embedding/table", &*tensor}};
  ASSERT_TRUE((*client)->PushDense(0, 1, map).ok());

  std::fill(data, data + kRows * kCols, -100.0f);
  absl::StatusOr<int64_t> version = (*client)->PullDense(1, map);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 1);
  // 1 - 0.5 * g for every element, in every row on every ps.
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    ASSERT_EQ(data[i], 1.0f - 0.5f * ((i % 7) * 0.25f)) << "element " << i;
  }
}

TEST(PsLargeVariable, OneGibWholeOnOnePs) { PushAndPull(1, {}); }

TEST(PsLargeVariable, OneGibRowPartitionedOverTwoPs) {
  PlacementOptions options;
  options.rules = {{"table", 2}};
  PushAndPull(2, options);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain

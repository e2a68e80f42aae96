// Pulls and pushes of parts of dense variables (a tensor-parallel member's
// share, ps/dense_part.h) through PsClusterClient::HoldParts to real `ps`
// processes: parts that span two ps tasks' row ranges or miss one of them,
// columns gathered from both, and a sync step that divides each element by
// the batches of the pushes that covered it.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ps/dense_part.h"
#include "tests/ps_cluster.h"

namespace pstrain {
namespace testing {
namespace {

constexpr char kRun[] = "run-parts";

// "dense/kernel" [300, 64], rows [0, 150) on ps 0 and [150, 300) on ps 1;
// "dense/bias" [64] whole on one of them.
std::vector<VariableDef> Model() {
  return {ConstantVariable("dense/kernel", {300, 64}, 1.0f),
          ConstantVariable("dense/bias", {64}, 0.0f)};
}

PlacementOptions SplitKernel() {
  PlacementOptions options;
  options.rules = {{"kernel", 2}};
  return options;
}

// A member's part-shaped tensors for `parts`.
struct Parts {
  std::map<std::string, ps::DensePart> parts;
  Tensor kernel, bias;
  Parts(ps::DensePart k, ps::DensePart b)
      : parts({{"dense/kernel", k}, {"dense/bias", b}}),
        kernel(*Tensor::Create(DT_FLOAT, ps::PartShape(Model()[0], k))),
        bias(*Tensor::Create(DT_FLOAT, ps::PartShape(Model()[1], b))) {}
  std::map<std::string, Tensor*> map() {
    return {{"dense/kernel", &kernel}, {"dense/bias", &bias}};
  }
};

TEST(PsParts, MembersPullAndPushTheirPartsAcrossPsTasks) {
  PsCluster cluster;
  ASSERT_TRUE(cluster.Start(2).ok());
  auto connect = [&](int worker) {
    auto client = cluster.Connect(kRun, worker, Model(), SplitKernel());
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  };
  ASSERT_TRUE(connect(0)
                  ->CreateVariables(Sgd(0.5), Update(UpdateConfig::SYNC, 4))
                  .ok());
  // data:2,model:2: member 0 of each group holds kernel rows [0, 200) (all
  // of ps 0's, part of ps 1's) and bias [0, 32); member 1 rows [200, 300)
  // (none of ps 0's) and bias [32, 64).
  for (int worker = 0; worker < 4; ++worker) {
    auto client = connect(worker);
    const bool first = worker % 2 == 0;
    Parts mine(first ? ps::DensePart{0, 0, 200} : ps::DensePart{0, 200, 300},
               first ? ps::DensePart{0, 0, 32} : ps::DensePart{0, 32, 64});
    ASSERT_TRUE(client->HoldParts(mine.parts).ok());
    absl::StatusOr<int64_t> version = client->PullDense(0, mine.map());
    ASSERT_TRUE(version.ok()) << version.status();
    for (float v : mine.kernel.flat<float>()) ASSERT_EQ(v, 1.0f);
    for (float v : mine.bias.flat<float>()) ASSERT_EQ(v, 0.0f);
    // Gradient sums worker + 1 over a batch of 2.
    for (float& v : mine.kernel.flat<float>()) v = worker + 1;
    for (float& v : mine.bias.flat<float>()) v = worker + 1;
    absl::Status pushed = client->PushDense(0, 2, mine.map());
    ASSERT_TRUE(pushed.ok()) << pushed;
  }
  // Each element came from 2 pushes of 2 examples: members 0 (workers 0,
  // 2) sum 4, members 1 (workers 1, 3) sum 6.
  auto reader = connect(0);
  Tensor kernel = *Tensor::Create(DT_FLOAT, {300, 64});
  Tensor bias = *Tensor::Create(DT_FLOAT, {64});
  ASSERT_TRUE(
      reader->PullDense(1, {{"dense/kernel", &kernel}, {"dense/bias", &bias}})
          .ok());
  for (int64_t r = 0; r < 300; ++r) {
    ASSERT_EQ(kernel.flat<float>()[r * 64 + 5], r < 200 ? 0.5f : 0.25f)
        << "row " << r;
  }
  for (int64_t c = 0; c < 64; ++c) {
    ASSERT_EQ(bias.flat<float>()[c], c < 32 ? -0.5f : -0.75f) << c;
  }
  // Columns [16, 48) of the kernel, gathered by both ps tasks.
  Parts columns(ps::DensePart{1, 16, 48}, ps::DensePart{0, 8, 9});
  ASSERT_TRUE(reader->HoldParts(columns.parts).ok());
  ASSERT_TRUE(reader->PullDense(1, columns.map()).ok());
  ASSERT_EQ(columns.kernel.shape(), (std::vector<int64_t>{300, 32}));
  for (int64_t r = 0; r < 300; ++r) {
    for (int64_t c = 0; c < 32; ++c) {
      ASSERT_EQ(columns.kernel.flat<float>()[r * 32 + c],
                kernel.flat<float>()[r * 64 + 16 + c]);
    }
  }
  EXPECT_EQ(columns.bias.flat<float>()[0], -0.5f);
  // A part out of bounds is refused before anything is sent.
  absl::Status bad = reader->HoldParts({{"dense/kernel", {1, 60, 70}}});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_NE(bad.message().find("dense/kernel"), std::string::npos) << bad;
}

}  // namespace
}  // namespace testing
}  // namespace pstrain

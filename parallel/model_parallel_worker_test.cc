#include "parallel/model_parallel_worker.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace parallel {
namespace {

constexpr char kLayout[] =
    R"({"d1/kernel": [null, "model"], "d1/bias": ["model"]})";

TEST(ModelParallelWorker, EachWorkerOfAGroupStartsItsMemberOnItsOwnAddress) {
  absl::StatusOr<worker::ModelSpec> mlp =
      worker::LoadModel("examples/seed000_mlp.keras3.json", 1);
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  absl::StatusOr<TensorParallelSetup> setup =
      SetUpTensorParallel(*mlp, "data:2,model:2", kLayout, 4);
  ASSERT_TRUE(setup.ok()) << setup.status();
  ModelParallelWorkerOptions options;
  for (int w = 0; w < 4; ++w) {
    options.worker_addresses.push_back(
        absl::StrCat("127.0.0.1:", testing::PickFreePort()));
  }
  // Worker 3 is member 1 of group 1: its ring listens on its own address.
  options.worker_index = 3;
  absl::StatusOr<ModelParallelWorker> member =
      StartModelParallelWorker(*mlp, *setup, options);
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_NE(member->backend, nullptr);
  EXPECT_EQ(member->device, "CPU, member 1 of model-parallel group 1");
}

TEST(ModelParallelWorker, RefusesAWorkerOutsideTheMesh) {
  absl::StatusOr<worker::ModelSpec> mlp =
      worker::LoadModel("examples/seed000_mlp.keras3.json", 1);
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  absl::StatusOr<TensorParallelSetup> setup =
      SetUpTensorParallel(*mlp, "data:1,model:2", kLayout, 2);
  ASSERT_TRUE(setup.ok()) << setup.status();
  ModelParallelWorkerOptions options;
  options.worker_addresses = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};
  absl::StatusOr<ModelParallelWorker> member =
      StartModelParallelWorker(*mlp, *setup, options);
  ASSERT_FALSE(member.ok());
  EXPECT_EQ(member.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(member.status().message(),
            "worker 0 of 3 does not fit the mesh data:1,model:2");
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain

#include "parallel/tensor_parallel_setup.h"

#include <string>

#include "gtest/gtest.h"
#include "model/keras_model.h"

namespace pstrain {
namespace parallel {
namespace {

worker::ModelSpec Load(const std::string& name) {
  absl::StatusOr<worker::ModelSpec> spec = worker::LoadModel(name, 1);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : worker::ModelSpec();
}

TEST(TensorParallelSetup, Model2MembersHoldHalfOfEachSplitVariable) {
  const worker::ModelSpec mlp = Load("examples/seed000_mlp.keras3.json");
  absl::StatusOr<TensorParallelSetup> setup = SetUpTensorParallel(
      mlp, "data:2,model:2",
      R"({"d1/kernel": [null, "model"], "d1/bias": ["model"],
          "d2/kernel": ["model", null]})",
      4);
  ASSERT_TRUE(setup.ok()) << setup.status();
  EXPECT_EQ(setup->mesh.data, 2);
  ASSERT_EQ(setup->plans.size(), 2u);
  EXPECT_EQ(setup->plans[1].member, 1);
  // d1/kernel 784x200 and d2/kernel 200x10 are halved; d2/bias (10) is
  // held whole by both.
  EXPECT_EQ(setup->model_parameters, 784 * 200 + 200 * 10 + 10);
  EXPECT_EQ(setup->member_parameters,
            (std::vector<int64_t>{784 * 100 + 100 * 10 + 10,
                                  784 * 100 + 100 * 10 + 10}));
}

TEST(TensorParallelSetup, DefaultsToDataParallelWithEverythingReplicated) {
  const worker::ModelSpec cnn = Load("cnn");
  absl::StatusOr<TensorParallelSetup> setup =
      SetUpTensorParallel(cnn, "", "", 3);
  ASSERT_TRUE(setup.ok()) << setup.status();
  EXPECT_EQ(setup->mesh.data, 3);
  EXPECT_EQ(setup->mesh.model, 1);
  ASSERT_EQ(setup->member_parameters.size(), 1u);
  EXPECT_EQ(setup->member_parameters[0], setup->model_parameters);
}

void ExpectRefused(const worker::ModelSpec& spec, const std::string& mesh,
                   const std::string& layout, int workers,
                   const std::string& words) {
  absl::StatusOr<TensorParallelSetup> setup =
      SetUpTensorParallel(spec, mesh, layout, workers);
  ASSERT_FALSE(setup.ok()) << mesh << " " << layout;
  EXPECT_EQ(setup.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(setup.status().message().find(words), std::string::npos)
      << setup.status();
}

TEST(TensorParallelSetup, RefusesBeforeTheRunNamingWhatIsWrong) {
  const worker::ModelSpec mlp = Load("examples/seed000_mlp.keras3.json");
  ExpectRefused(mlp, "data:3,model:2", "", 4, "--mesh=data:3,model:2");
  ExpectRefused(mlp, "model:2", R"({"d1/kernel": [null, "modle"]})", 2,
                "unknown axis 'modle'");
  ExpectRefused(mlp, "model:3", R"({"d1/kernel": [null, "model"]})", 3,
                "variable 'd1/kernel' (size 200) over model:3");
  ExpectRefused(mlp, "model:2", R"({"d2/kernel": [null, "model"]})", 2,
                "layer 'd2': kernel 'd2/kernel' is split on its output "
                "dimension (column-parallel), so bias 'd2/bias' must be split");
  // A model the members cannot run yet, even with nothing split.
  ExpectRefused(Load("cnn"), "model:2", "", 2,
                "layer 'conv2d': has a regularizer");
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain

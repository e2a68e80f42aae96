// Helpers of the tests that train a model tensor-parallel and compare it
// with one process (tensor_parallel_member_test, tensor_parallel_backend_
// test, tensor_parallel_transformer_test): the seed 000 MLP, random data for
// 50 steps of a global batch of 32, the CPU backend's training of it in one
// process with plain SGD, and a member's parts trained the same way.
#ifndef PSTRAIN_PARALLEL_EQUIVALENCE_TEST_UTIL_H_
#define PSTRAIN_PARALLEL_EQUIVALENCE_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/tensor.h"
#include "compute/backend.h"
#include "model/model_spec.h"
#include "parallel/group_collective.h"
#include "parallel/tensor_parallel_plan.h"

namespace pstrain {
namespace parallel {

inline constexpr uint64_t kSeed = 7;
inline constexpr int kSteps = 50;
inline constexpr int kGlobalBatch = 32;
inline constexpr float kLearningRate = 0.05f;
inline constexpr int64_t kFeatures = 28 * 28;

// Column-parallel d1 (the issue's layout), and with row-parallel d2.
inline constexpr char kColumnD1[] =
    R"({"d1/kernel": [null, "model"], "d1/bias": ["model"]})";
inline constexpr char kColumnD1RowD2[] =
    R"({"d1/kernel": [null, "model"], "d1/bias": ["model"],
        "d2/kernel": ["model", null]})";

// examples/seed000_mlp.keras3.json with seed kSeed (ADD_FAILURE if not).
worker::ModelSpec SeedMlp();

struct Data {
  int64_t features_per_example = 0;
  std::vector<float> features;  // [kSteps * kGlobalBatch, features]
  std::vector<int32_t> labels;  // in [0, 10)
};
// Uniform features in [0, 1) and labels, from a fixed seed.
Data MakeData(int64_t features_per_example);

using Variables = std::map<std::string, std::vector<float>>;
// `tensors` (in spec.variables' order) by variable name.
Variables Snapshot(const worker::ModelSpec& spec,
                   const std::vector<Tensor>& tensors);
// The largest difference between equally named values of a and b.
double LargestDifference(const Variables& a, const Variables& b);

struct Trained {
  Variables initial;
  Variables trained;
  std::vector<double> losses;  // per step, summed over the global batch
};

// The loss both computations train with.
struct Loss {
  worker::LossKind kind = worker::LossKind::kMeanSquaredError;
  worker::LossInput input = worker::LossInput::kProbabilities;
};

// One process: the CPU backend on each step's whole global batch, from the
// variables' Keras initializers, w -= kLearningRate * gradient / batch.
Trained TrainOneProcess(const worker::ModelSpec& spec, const Data& data,
                        const Loss& loss);

// A member's parts of the weights (cut from whole values) and their
// gradients, with the maps TensorParallelMember::TrainStep takes (pointing
// into the tensors, which stay where they are when this is moved).
struct MemberTensors {
  std::map<std::string, Tensor> weights, gradients;
  worker::Weights weight_map;
  worker::Gradients gradient_map;
};
MemberTensors CutParts(const TensorParallelPlan& plan, const Variables& whole);

// Plain SGD on the member's parts after a step: the gradients summed over
// the data-parallel replicas first (`replicas` null: one replica), then
// w -= kLearningRate * gradient / kGlobalBatch. A collective's error as is.
absl::Status SgdStep(MemberTensors& member, GroupCollective* replicas);

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_EQUIVALENCE_TEST_UTIL_H_

// The CPU backend against an independent implementation of Keras's
// semantics: models, weights and a batch that TensorFlow.js 4.22.0 wrote,
// with the loss, accuracy and gradients its CPU backend computed from them
// (tests/reference/README.md says how they are regenerated). The models'
// JSON is what TF.js's model.toJSON() writes, so these tests also check that
// the parser reads what another Keras implementation writes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/backend.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/model/keras_model.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

using Json = nlohmann::json;

// Both sides compute in float32, in different orders (oneDNN's blocked
// GEMMs and convolutions against TF.js's loops; the loss from the logits
// here, from the probabilities there), so they agree to a few float32
// roundings per accumulated term, not bit for bit. The loss sum adds
// positive terms: its error is relative to it. A gradient component is a
// sum of many terms of either sign (over the batch, the positions, the
// layers above), which can cancel to near 0 while each term's rounding stays
// the size of the tensor's typical component; so a component may be off by
// kTolerance times its own magnitude or times 1/100 of its tensor's largest
// one, whichever is larger. The errors seen: the loss sum within 1e-7 relative;
// gradient components within 6e-7 of their tensor's largest one (up to 5e-5
// relative for the small ones), i.e. at most 0.21 of this tolerance. A wrong
// layout, stride, padding or activation is wrong from the first digits, and
// moving one of mlp_sequential's 50k weights by 1e-3 already fails.
constexpr double kTolerance = 1e-4;
constexpr double kFloorOfLargest = 1e-2;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A file of tests/reference/testdata in this test's runfiles.
Json LoadCase(const std::string& name) {
  const char* root = std::getenv("TEST_SRCDIR");
  const std::string path = std::string(root == nullptr ? "." : root) +
                           "/pstrain/tests/reference/testdata/" + name +
                           ".json";
  const std::string text = ReadFile(path);
  EXPECT_FALSE(text.empty()) << "cannot read " << path;
  Json record = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(record.is_discarded()) << path << " is not JSON";
  return record;
}

std::vector<int64_t> Shape(const Json& entry) {
  return entry.at("shape").get<std::vector<int64_t>>();
}

// A {"shape", "values"} entry as a float32 tensor.
Tensor ToTensor(const Json& entry) {
  absl::StatusOr<Tensor> t = Tensor::Create(DT_FLOAT, Shape(entry));
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return Tensor();
  const Json& values = entry.at("values");
  if (static_cast<int64_t>(values.size()) != t->num_elements()) {
    ADD_FAILURE() << values.size() << " values for shape "
                  << ShapeString(t->shape());
    return Tensor();
  }
  float* data = t->data<float>();
  for (const Json& v : values) *data++ = v.get<float>();
  return std::move(*t);
}

// Success when every component of `actual` is within the tolerance above of
// `expected`'s; names the worst one otherwise.
::testing::AssertionResult GradientMatches(const Tensor& actual,
                                           const Tensor& expected) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << ShapeString(actual.shape()) << ", expected "
           << ShapeString(expected.shape());
  }
  const absl::Span<const float> a = actual.flat<float>();
  const absl::Span<const float> b = expected.flat<float>();
  double largest = 0;
  for (float v : b) largest = std::max(largest, std::fabs(double{v}));
  int64_t worst = -1;
  double worst_ratio = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double allowed = kTolerance * std::max(std::fabs(double{b[i]}),
                                                 kFloorOfLargest * largest);
    const double error = std::fabs(double{a[i]} - double{b[i]});
    double ratio = allowed > 0 ? error / allowed : (error == 0 ? 0 : INFINITY);
    if (std::isnan(ratio)) ratio = INFINITY;
    if (worst < 0 || ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = static_cast<int64_t>(i);
    }
  }
  if (worst_ratio <= 1) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "component " << worst << " is " << a[worst] << ", expected "
         << b[worst] << " (error " << std::fabs(a[worst] - b[worst]) << ", "
         << worst_ratio << " times the tolerance; largest component " << largest
         << ")";
}

// Parses the case's model, runs one training step of the CPU backend on its
// batch and weights, and compares the loss, the accuracy and every gradient
// with TF.js's.
void ExpectMatchesReference(const std::string& name) {
  const Json record = LoadCase(name);
  ASSERT_TRUE(record.is_object());

  absl::StatusOr<ModelSpec> spec =
      ParseKerasModel(record.at("model").dump(), /*seed=*/1);
  ASSERT_TRUE(spec.ok()) << "the model TF.js wrote does not parse: "
                         << spec.status();

  // Every variable of the model has a value and an expected gradient, and
  // the file has nothing the model lacks.
  const Json& weight_entries = record.at("weights");
  const Json& expected = record.at("expected");
  const Json& gradient_entries = expected.at("gradients");
  ASSERT_EQ(weight_entries.size(), spec->variables.size());
  ASSERT_EQ(gradient_entries.size(), spec->variables.size());
  std::vector<Tensor> weights;
  std::vector<Tensor> gradients;
  std::vector<Tensor> expected_gradients;
  for (const VariableDef& def : spec->variables) {
    ASSERT_TRUE(weight_entries.contains(def.name()))
        << "no weights for " << def.name();
    ASSERT_TRUE(gradient_entries.contains(def.name()))
        << "no gradient for " << def.name();
    const std::vector<int64_t> shape(def.shape().dims().begin(),
                                     def.shape().dims().end());
    ASSERT_EQ(Shape(weight_entries.at(def.name())), shape) << def.name();
    weights.push_back(ToTensor(weight_entries.at(def.name())));
    expected_gradients.push_back(ToTensor(gradient_entries.at(def.name())));
    absl::StatusOr<Tensor> g = Tensor::Create(DT_FLOAT, shape);
    ASSERT_TRUE(g.ok()) << g.status();
    gradients.push_back(std::move(*g));
  }
  Weights weight_map;
  Gradients gradient_map;
  for (size_t i = 0; i < spec->variables.size(); ++i) {
    weight_map[spec->variables[i].name()] = &weights[i];
    gradient_map[spec->variables[i].name()] = &gradients[i];
  }

  const Json& batch = record.at("batch");
  const std::vector<float> features =
      batch.at("features").get<std::vector<float>>();
  const std::vector<int32_t> labels =
      batch.at("labels").get<std::vector<int32_t>>();
  ASSERT_EQ(Shape(batch).at(0), static_cast<int64_t>(labels.size()));

  CpuBackendOptions options;
  options.num_threads = 1;
  options.loss = LossKind::kSparseCrossEntropy;
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      CreateCpuBackend(*spec, options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  StepInput in;
  in.features = features.data();
  in.labels = labels.data();
  in.batch = static_cast<int64_t>(labels.size());
  in.weights_version = 1;
  // The models have no dropout, so training mode computes what TF.js's
  // inference-mode pass did.
  absl::StatusOr<StepResult> result =
      (*backend)->TrainStep(in, weight_map, &gradient_map);
  ASSERT_TRUE(result.ok()) << result.status();

  const double loss_sum = expected.at("loss_sum").get<double>();
  EXPECT_NEAR(result->loss_sum, loss_sum, kTolerance * std::fabs(loss_sum));
  EXPECT_EQ(result->correct, expected.at("correct").get<int64_t>());
  EXPECT_EQ(result->examples, in.batch);
  for (size_t i = 0; i < spec->variables.size(); ++i) {
    EXPECT_TRUE(GradientMatches(gradients[i], expected_gradients[i]))
        << spec->variables[i].name();
  }
}

// Sequential: Dense(64, relu) -> Dense(10, softmax) on [784]; the input shape
// rides on the first Dense (TF.js writes no InputLayer for a Sequential).
TEST(KerasReference, MlpSequential) {
  ExpectMatchesReference("mlp_sequential");
}

// Conv2D(8, 3, same, relu) -> MaxPooling2D(2) -> Conv2D(16, 3, strides 2,
// valid, relu) -> Flatten -> Dense(32, relu) -> Dense(10, softmax) on
// [28, 28, 1], with TF.js's default initializers written in the JSON
// (VarianceScaling for the kernels).
TEST(KerasReference, CnnSequential) {
  ExpectMatchesReference("cnn_sequential");
}

// mlp_sequential's model, weights and batch through the functional API
// (class_name "Model", an InputLayer, inbound_nodes): the same results.
TEST(KerasReference, MlpFunctional) {
  ExpectMatchesReference("mlp_functional");
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

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
#include "compute/backend.h"
#include "compute/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"
#include "nlohmann/json.hpp"

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
// one, whichever is larger. The errors seen:
// the loss sum within 1e-7 relative; gradient components within 6e-7 of
// their tensor's largest one (up to 5e-5 relative for the small ones), i.e.
// at most 0.21 of this tolerance (also with oneDNN capped at AVX2 or SSE4.1,
// ONEDNN_MAX_CPU_ISA). A wrong layout, stride, padding or activation is
// wrong from the first digits, and moving one of mlp_sequential's 50k
// weights by 1e-3 already fails.
constexpr double kTolerance = 1e-4;
constexpr double kFloorOfLargest = 1e-2;

// resnet_block used to need a floor 10 times this one: oneDNN's
// BatchNormalization backward summed dbeta and dgamma in float32, which
// shifted every row's dx alike and put the Conv2D kernel before it 4.3
// times this tolerance off. Our backward sums in double (cpu/batch_norm.h).

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
                                           const Tensor& expected,
                                           double floor_of_largest) {
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
                                                 floor_of_largest * largest);
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

// The batch's features as pstrain feeds them: one row per example. A case
// of several inputs holds each input's features apart ("inputs": name,
// shape [batch, ...], values); a row is then the first input's elements,
// then the second's, and so on (data/model_input.h), ids as exact floats.
std::vector<float> PackFeatures(const Json& batch, const ModelSpec& spec,
                                int64_t examples) {
  if (!batch.contains("inputs")) {
    EXPECT_EQ(spec.inputs.size(), 1u);
    EXPECT_EQ(Shape(batch).at(0), examples);
    return batch.at("features").get<std::vector<float>>();
  }
  const Json& inputs = batch.at("inputs");
  EXPECT_EQ(inputs.size(), spec.inputs.size());
  if (inputs.size() != spec.inputs.size()) return {};
  std::vector<std::vector<float>> values;
  std::vector<int64_t> row_sizes;
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    EXPECT_EQ(inputs[k].at("name").get<std::string>(), spec.inputs[k].name);
    const std::vector<int64_t> shape = Shape(inputs[k]);
    EXPECT_EQ(shape.at(0), examples) << spec.inputs[k].name;
    EXPECT_EQ(std::vector<int64_t>(shape.begin() + 1, shape.end()),
              spec.inputs[k].shape)
        << spec.inputs[k].name;
    values.push_back(inputs[k].at("features").get<std::vector<float>>());
    row_sizes.push_back(static_cast<int64_t>(values.back().size()) / examples);
    EXPECT_EQ(row_sizes.back() * examples,
              static_cast<int64_t>(values.back().size()));
  }
  std::vector<float> rows;
  for (int64_t e = 0; e < examples; ++e) {
    for (size_t k = 0; k < values.size(); ++k) {
      rows.insert(rows.end(), values[k].begin() + e * row_sizes[k],
                  values[k].begin() + (e + 1) * row_sizes[k]);
    }
  }
  return rows;
}

// Parses the case's model, runs one training step of the CPU backend on its
// batch and weights, and compares the loss, the accuracy and every trained
// variable's gradient with TF.js's.
//
// BatchNormalization's moving_mean and moving_variance are not trained:
// what a training step writes for them in place of a gradient is the batch's
// mean and (biased) variance of the layer's input, times the batch size,
// which the ps folds into the moving averages (VariableDef.moving_average).
// TF.js has no gradient to compare with (they are not differentiated:
// training-mode normalization does not read them), so the file lists them
// apart, under "batch_statistics": the mean and variance TF.js's
// training-mode BatchNormalization normalized with, which must come out the
// same here once multiplied by the batch size.
void ExpectMatchesReference(const std::string& name,
                            double floor_of_largest = kFloorOfLargest) {
  const Json record = LoadCase(name);
  ASSERT_TRUE(record.is_object());

  absl::StatusOr<ModelSpec> spec =
      ParseKerasModel(record.at("model").dump(), /*seed=*/1);
  ASSERT_TRUE(spec.ok()) << "the model TF.js wrote does not parse: "
                         << spec.status();

  const Json& batch = record.at("batch");
  const std::vector<int32_t> labels =
      batch.at("labels").get<std::vector<int32_t>>();
  const int64_t examples = static_cast<int64_t>(labels.size());
  const std::vector<float> features = PackFeatures(batch, *spec, examples);
  ASSERT_FALSE(::testing::Test::HasFailure());

  // Every variable of the model has a value and an expected gradient (a
  // moving statistic: the batch's), and the file has nothing the model lacks.
  // A case without gradients (dilated convolutions, which TF.js cannot
  // differentiate) checks the forward pass alone: loss and predictions.
  const Json& weight_entries = record.at("weights");
  const Json& expected = record.at("expected");
  const bool has_gradients = expected.contains("gradients");
  const Json gradient_entries = expected.value("gradients", Json::object());
  const Json statistic_entries =
      expected.value("batch_statistics", Json::object());
  ASSERT_EQ(weight_entries.size(), spec->variables.size());
  if (has_gradients) {
    ASSERT_EQ(gradient_entries.size() + statistic_entries.size(),
              spec->variables.size());
  }
  std::vector<Tensor> weights;
  std::vector<Tensor> gradients;
  std::vector<Tensor> expected_gradients;
  for (const VariableDef& def : spec->variables) {
    const bool moving = def.has_moving_average();
    const Json& entries = moving ? statistic_entries : gradient_entries;
    ASSERT_TRUE(weight_entries.contains(def.name()))
        << "no weights for " << def.name();
    const std::vector<int64_t> shape(def.shape().dims().begin(),
                                     def.shape().dims().end());
    ASSERT_EQ(Shape(weight_entries.at(def.name())), shape) << def.name();
    weights.push_back(ToTensor(weight_entries.at(def.name())));
    if (!has_gradients) {
      expected_gradients.emplace_back();
    } else {
      ASSERT_TRUE(entries.contains(def.name()))
          << (moving ? "no batch statistic for " : "no gradient for ")
          << def.name();
      expected_gradients.push_back(ToTensor(entries.at(def.name())));
    }
    if (moving && has_gradients) {
      // The batch's statistic, summed over its examples like a gradient.
      for (float& v : expected_gradients.back().flat<float>()) {
        v *= static_cast<float>(examples);
      }
    }
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

  CpuBackendOptions options;
  options.num_threads = 1;
  options.loss = LossKind::kSparseCrossEntropy;
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      CreateCpuBackend(*spec, options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  StepInput in;
  in.features = features.data();
  in.labels = labels.data();
  in.batch = examples;
  in.weights_version = 1;
  // Training mode on both sides: TF.js's pass was model.apply(x, {training:
  // true}), so BatchNormalization normalizes with the batch's statistics;
  // the models have no dropout.
  absl::StatusOr<StepResult> result =
      (*backend)->TrainStep(in, weight_map, &gradient_map);
  ASSERT_TRUE(result.ok()) << result.status();

  const double loss_sum = expected.at("loss_sum").get<double>();
  EXPECT_NEAR(result->loss_sum, loss_sum, kTolerance * std::fabs(loss_sum));
  EXPECT_EQ(result->correct, expected.at("correct").get<int64_t>());
  EXPECT_EQ(result->examples, in.batch);
  // The regularizers' penalty (TF.js's model.calculateLosses()).
  const double regularization = expected.value("regularization", 0.0);
  EXPECT_NEAR(result->l2_loss, regularization,
              kTolerance * std::fabs(regularization));
  if (!has_gradients) return;
  for (size_t i = 0; i < spec->variables.size(); ++i) {
    EXPECT_TRUE(
        GradientMatches(gradients[i], expected_gradients[i], floor_of_largest))
        << spec->variables[i].name()
        << (spec->variables[i].has_moving_average()
                ? " (the batch statistic times the batch size)"
                : "");
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

// A residual block: Conv2D(4, 3, same, no bias) -> BatchNormalization ->
// ReLU, whose output is both the next Conv2D's input and the shortcut that
// Add sums with the second BatchNormalization's output -> Activation(relu)
// -> GlobalAveragePooling2D -> Dense(10, softmax), on [8, 8, 2]; both
// BatchNormalizations in training mode (batch mean and biased variance).
// Also checks the moving statistics' pushed values against TF.js's batch
// statistics.
TEST(KerasReference, ResnetBlock) { ExpectMatchesReference("resnet_block"); }

// Two inputs, 'dense' (4 floats) and 'ids' (3 int32 ids): Embedding(20, 4)
// on the ids, flattened and concatenated after the floats -> Dense(8, tanh)
// -> Dense(3, softmax). The rows are packed as pstrain feeds them: the 4
// floats, then the 3 ids as floats.
TEST(KerasReference, TwoInput) { ExpectMatchesReference("two_input"); }

// DepthwiseConv2D(3, depth_multiplier 2, same) -> Conv2D(4, 3, strides 2,
// relu) on [9, 8, 3] -> Reshape [12, 4] -> Conv1D(5, 3, causal, tanh) ->
// Conv1D(3, 4, strides 2, same) -> Flatten -> Dense(5, softmax), with L1 and
// L1L2 regularizers on kernels, the depthwise kernel and biases: the
// penalty, and the gradients of the summed loss plus batch times it (the
// causal Conv1D: TF.js computes it as Keras defines it, the valid
// convolution of the left-padded input; see keras_reference.mjs).
TEST(KerasReference, ConvVariantsAndRegularizers) {
  ExpectMatchesReference("conv_variants");
}

// Conv2D(4, 3, dilation 2, relu) on [10, 9, 2] -> DepthwiseConv2D(2,
// depth_multiplier 2, same; TF.js's layer ignores dilation_rate, so the
// dilated depthwise case is gradient_check_test's) -> Reshape [15, 16] ->
// Conv1D(4, 3, causal, dilation 2, tanh) -> Conv1D(3, 2, same, dilation 3)
// -> Flatten -> Dense(5, softmax), L1L2 on the first kernel: the loss,
// predictions and penalty (TF.js has no gradient for dilated convolutions;
// gradient_check_test checks theirs).
TEST(KerasReference, DilatedConvolutionsForward) {
  ExpectMatchesReference("dilated_convs");
}

// Dense(8, relu) on each row of a [6, 5] input -> LayerNormalization
// (epsilon 1e-3) -> Dense(8, tanh) and Dense(8) branches, multiplied ->
// GlobalAveragePooling1D -> Dense(4, softmax).
TEST(KerasReference, LayerNormMerge) {
  ExpectMatchesReference("layer_norm_merge");
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

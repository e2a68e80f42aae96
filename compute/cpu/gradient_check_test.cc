// Finite-difference checks of the CPU backend's gradients, layer by layer:
// each case is a small Functional model around the layer under test (a
// Dense before it, whose kernel's gradient flows through the layer's input
// gradient, and a Dense after it to logits), and each variable's gradient
// is checked along a random direction v against the central difference
// (L(w + h v) - L(w - h v)) / 2h of the summed loss.
//
// Both sides are float32 sums over a batch: the difference quotient carries
// about 1e-5 / 2h of rounding, and where an activation has a kink some
// pre-activations cross it within h; so directional derivatives must agree
// within 1% (plus a small absolute floor), which a wrong derivative, sign,
// routing or a missed sum of two gradient contributions misses by far.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tensor.h"
#include "compute/backend.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/cpu/model_test_util.h"
#include "data/model_input.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

constexpr int64_t kBatch = 5;
constexpr int kClasses = 3;
constexpr double kStep = 1e-3;
constexpr double kRelative = 1e-2;
constexpr double kAbsolute = 2e-3;

// Functional models (model_test_util.h): an input "x" (and "ids"), the
// output "out".
std::string Model(const std::string& dims,
                  const std::vector<std::string>& layers,
                  const std::string& id_dims = "") {
  return GraphModel(dims, layers, id_dims);
}
std::string Layer(const std::string& class_name, const std::string& name,
                  const std::string& fields,
                  const std::vector<std::string>& reads) {
  return GraphLayer(class_name, name, fields, reads);
}
std::string Dense(const std::string& name, int units, const std::string& reads,
                  const std::string& activation = "linear") {
  return GraphDense(name, units, reads, activation);
}

// The logits head: Flatten `reads`, then Dense "out".
std::vector<std::string> Head(const std::string& reads) {
  return {Layer("Flatten", "flat", "", {reads}), Dense("out", kClasses, "flat")};
}

std::vector<std::string> Join(std::vector<std::string> a,
                              const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class Checker {
 public:
  explicit Checker(const std::string& json) : spec_(MustParse(json)) {
    CpuBackendOptions options;
    options.num_threads = 1;
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        CreateCpuBackend(spec_, options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return;
    backend_ = *std::move(backend);
    vars_ = MakeVariables(spec_, Init::kRandom, 7);
    // Rows as model_input.h lays them out: floats, and ids where an
    // Embedding reads.
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> uniform(-1, 1);
    for (int b = 0; b < kBatch; ++b) {
      for (const InputColumns& c : ModelInputColumns(spec_)) {
        for (int64_t j = 0; j < c.count; ++j) {
          features_.push_back(c.ids ? static_cast<float>(rng() % c.vocabulary)
                                    : uniform(rng));
        }
      }
    }
    for (int i = 0; i < kBatch; ++i) labels_.push_back(i % kClasses);
  }

  // Checks every trained variable's gradient; `what` names the case. The
  // losses are training-mode losses (BatchNormalization on the batch's
  // statistics), from TrainStep. A moving average's "gradient" is no
  // derivative: it must be its batch statistic summed over the batch.
  // `step` is h: smaller for a max over close values, which a step of
  // kStep may cross.
  void CheckAll(const std::string& what, double step = kStep) {
    if (backend_ == nullptr) return;
    absl::StatusOr<StepResult> trained =
        backend_->TrainStep(Input(), vars_.weight_map, &vars_.gradient_map);
    ASSERT_TRUE(trained.ok()) << what << ": " << trained.status();
    std::vector<std::vector<float>> analytic_gradients;
    for (const Tensor& g : vars_.gradients) {
      analytic_gradients.emplace_back(g.data<float>(),
                                      g.data<float>() + g.num_elements());
    }
    std::mt19937 rng(11);
    std::normal_distribution<float> normal;
    for (size_t v = 0; v < spec_.variables.size(); ++v) {
      if (spec_.variables[v].has_moving_average()) continue;
      Tensor& w = vars_.weights[v];
      const std::vector<float>& g = analytic_gradients[v];
      std::vector<float> direction(w.num_elements());
      double analytic = 0;
      for (size_t i = 0; i < direction.size(); ++i) {
        direction[i] = normal(rng);
        analytic += static_cast<double>(g[i]) * direction[i];
      }
      const double numeric =
          (Loss(w, direction, step) - Loss(w, direction, -step)) / (2 * step);
      EXPECT_NEAR(analytic, numeric,
                  kAbsolute + kRelative * std::fabs(numeric))
          << what << ": " << spec_.variables[v].name();
    }
  }

  // The gradient TrainStep gives variable `name` (after CheckAll).
  std::vector<float> Gradient(const std::string& name) {
    for (size_t v = 0; v < spec_.variables.size(); ++v) {
      if (spec_.variables[v].name() != name) continue;
      const Tensor& g = vars_.gradients[v];
      return std::vector<float>(g.data<float>(),
                                g.data<float>() + g.num_elements());
    }
    ADD_FAILURE() << "no variable " << name;
    return {};
  }

  const std::vector<float>& features() const { return features_; }

 private:
  StepInput Input() {
    StepInput input;
    input.features = features_.data();
    input.labels = labels_.data();
    input.batch = kBatch;
    input.weights_version = ++version_;
    return input;
  }

  // The summed training loss (the models here have no dropout) with w
  // moved by h * direction, and the regularizers' penalty batch times, as
  // their gradient is (backend.h).
  double Loss(Tensor& w, const std::vector<float>& direction, double h) {
    float* values = w.data<float>();
    std::vector<float> saved(values, values + w.num_elements());
    for (size_t i = 0; i < direction.size(); ++i) {
      values[i] += static_cast<float>(h) * direction[i];
    }
    absl::StatusOr<StepResult> result =
        backend_->TrainStep(Input(), vars_.weight_map, &vars_.gradient_map);
    std::copy(saved.begin(), saved.end(), values);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->loss_sum + kBatch * result->l2_loss : 0;
  }

  ModelSpec spec_;
  std::unique_ptr<Backend> backend_;
  ModelVariables vars_;
  std::vector<float> features_;
  std::vector<int32_t> labels_;
  uint64_t version_ = 0;
};

TEST(GradientCheck, EveryActivation) {
  for (const char* activation :
       {"relu", "relu6", "leaky_relu", "softmax", "log_softmax", "gelu",
        "gelu_new", "sigmoid", "hard_sigmoid", "tanh", "silu", "swish", "elu",
        "selu", "softplus"}) {
    // As a Dense's activation and as an Activation layer.
    Checker(Model("4", Join({Dense("pre", 6, "x", activation)}, Head("pre"))))
        .CheckAll(absl::StrCat("Dense activation ", activation));
    Checker(Model("4", Join({Dense("pre", 6, "x"),
                             Layer("Activation", "act",
                                   absl::StrCat(R"("activation": ")",
                                                activation, "\""),
                                   {"pre"})},
                            Head("act"))))
        .CheckAll(absl::StrCat("Activation ", activation));
  }
}

TEST(GradientCheck, ActivationLayers) {
  const std::vector<std::pair<std::string, std::string>> layers = {
      {"ReLU", R"("max_value": 0.3, "negative_slope": 0.1, "threshold": 0.05)"},
      {"LeakyReLU", R"("negative_slope": 0.2)"},
      {"LeakyReLU", R"("alpha": 0.25)"},
      {"ELU", R"("alpha": 0.7)"},
      {"Softmax", R"("axis": -1)"},
  };
  for (const auto& [class_name, fields] : layers) {
    Checker(Model("4", Join({Dense("pre", 6, "x"),
                             Layer(class_name, "act", fields, {"pre"})},
                            Head("act"))))
        .CheckAll(absl::StrCat(class_name, " ", fields));
  }
}

// Dense on the last axis of a rank-2 input, and softmax / log_softmax over
// either axis of it.
TEST(GradientCheck, DenseOnRankTwoAndSoftmaxOverAnAxis) {
  Checker(Model("2, 4", Join({Dense("pre", 3, "x", "tanh")}, Head("pre"))))
      .CheckAll("Dense on [2, 4]");
  for (const char* axis : {"1", "2", "-1"}) {
    Checker(Model("2, 4", Join({Dense("pre", 3, "x"),
                                Layer("Softmax", "sm",
                                      absl::StrCat(R"("axis": )", axis),
                                      {"pre"})},
                               Head("sm"))))
        .CheckAll(absl::StrCat("Softmax axis ", axis));
  }
}

TEST(GradientCheck, EveryMergeAndConcatenate) {
  for (const char* merge :
       {"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum"}) {
    Checker(Model("4", Join({Dense("a", 5, "x", "tanh"), Dense("b", 5, "x"),
                             Layer(merge, "m", "", {"a", "b"})},
                            Head("m"))))
        .CheckAll(merge);
  }
  // Three inputs, one of them the same tensor twice: its gradient is the
  // sum of both routes.
  Checker(Model("4", Join({Dense("a", 5, "x", "tanh"), Dense("b", 5, "a"),
                           Layer("Add", "m", "", {"a", "b", "a"})},
                          Head("m"))))
      .CheckAll("Add(a, b(a), a)");
  Checker(Model("4", Join({Dense("a", 5, "x", "sigmoid"), Dense("b", 5, "x"),
                           Layer("Multiply", "m", "", {"a", "b", "b"})},
                          Head("m"))))
      .CheckAll("Multiply(a, b, b)");
  Checker(Model("2, 4", Join({Dense("a", 3, "x", "tanh"), Dense("b", 2, "x"),
                              Layer("Concatenate", "c", R"("axis": -1)",
                                    {"a", "b"})},
                             Head("c"))))
      .CheckAll("Concatenate last axis");
  Checker(Model("2, 4", Join({Dense("a", 4, "x", "tanh"), Dense("b", 4, "a"),
                              Layer("Concatenate", "c", R"("axis": 1)",
                                    {"a", "b", "x"})},
                             Head("c"))))
      .CheckAll("Concatenate first axis, with the model input");
  // The model input first: it needs no gradient, the layers after it do.
  Checker(Model("2, 4", Join({Dense("a", 4, "x", "tanh"),
                              Layer("Concatenate", "c", R"("axis": -1)",
                                    {"x", "a"})},
                             Head("c"))))
      .CheckAll("Concatenate, the model input first");
}

// A residual block, as ResNets have them: the input of a block reaches its
// output twice, through the block and around it.
TEST(GradientCheck, ResidualConvolutionBlock) {
  Checker(Model(
              "6, 6, 2",
              Join({Layer("Conv2D", "c1",
                          R"("filters": 4, "kernel_size": 3, "padding": "same",
                             "activation": "relu")",
                          {"x"}),
                    Layer("Conv2D", "c2",
                          R"("filters": 4, "kernel_size": 3, "padding": "same")",
                          {"c1"}),
                    Layer("Add", "add", "", {"c1", "c2"}),
                    Layer("ReLU", "r", "", {"add"}),
                    Layer("MaxPooling2D", "pool", "", {"r"})},
                   Head("pool"))))
      .CheckAll("residual block");
}

// Conv2D's dilation_rate, DepthwiseConv2D and Conv1D, each after a Dense
// (so their input gradient is checked through its kernel's), in every
// padding, with strides, dilation, depth_multiplier and without bias.
TEST(GradientCheck, DilatedDepthwiseAndOneDimensionalConvolutions) {
  const std::vector<std::pair<std::string, std::string>> images = {
      {"Conv2D", R"("filters": 3, "kernel_size": 3, "dilation_rate": 2)"},
      {"Conv2D", R"("filters": 2, "kernel_size": [2, 3],
                    "dilation_rate": [2, 1], "padding": "same")"},
      {"DepthwiseConv2D", R"("kernel_size": 3, "padding": "same")"},
      {"DepthwiseConv2D", R"("kernel_size": 2, "padding": "same")"},
      {"DepthwiseConv2D", R"("kernel_size": [2, 3], "depth_multiplier": 2,
                             "strides": 2, "use_bias": false)"},
      {"DepthwiseConv2D", R"("kernel_size": 2, "dilation_rate": 2,
                             "depth_multiplier": 3, "padding": "same",
                             "activation": "tanh")"},
  };
  for (const auto& [class_name, fields] : images) {
    Checker(Model("6, 5, 2", Join({Dense("pre", 3, "x", "tanh"),
                                   Layer(class_name, "c", fields, {"pre"})},
                                  Head("c"))))
        .CheckAll(absl::StrCat(class_name, " ", fields));
  }
  for (const char* fields :
       {R"("filters": 3, "kernel_size": 3)",
        R"("filters": 2, "kernel_size": 3, "padding": "same", "strides": 2)",
        R"("filters": 3, "kernel_size": 2, "padding": "causal",
           "dilation_rate": 3)",
        R"("filters": 2, "kernel_size": [3], "padding": "causal",
           "strides": 2, "use_bias": false, "activation": "relu")",
        R"("filters": 2, "kernel_size": 2, "padding": "same",
           "dilation_rate": [2])"}) {
    Checker(Model("7, 3", Join({Dense("pre", 4, "x", "tanh"),
                                Layer("Conv1D", "c", fields, {"pre"})},
                               Head("c"))))
        .CheckAll(absl::StrCat("Conv1D ", fields));
  }
}

// L1, L2 and L1L2 on kernels, biases and a depthwise kernel: the loss
// checked is the summed loss plus batch times the penalty, whose gradient
// the backend adds.
TEST(GradientCheck, Regularizers) {
  const std::string l1 = R"({"class_name": "L1", "config": {"l1": 0.05}})";
  const std::string l2 = R"({"class_name": "L2", "config": {"l2": 0.03}})";
  const std::string l1l2 =
      R"({"class_name": "L1L2", "config": {"l1": 0.02, "l2": 0.04}})";
  Checker checker(Model(
      "5, 4, 2", {Layer("Conv2D", "c",
                        absl::StrCat(R"("filters": 3, "kernel_size": 2,
                                  "bias_initializer": "random_normal",
                                  "kernel_regularizer": )",
                                     l1, R"(, "bias_regularizer": )", l1l2),
                        {"x"}),
                  Layer("DepthwiseConv2D", "dw",
                        absl::StrCat(R"("kernel_size": 2, "padding": "same",
                                  "bias_initializer": "random_normal",
                                  "depthwise_regularizer": )",
                                     l1l2, R"(, "bias_regularizer": )", l2),
                        {"c"}),
                  Layer("Flatten", "flat", "", {"dw"}),
                  Layer("Dense", "out",
                        absl::StrCat(R"("units": 3, "bias_initializer": "ones",
                                  "kernel_regularizer": )",
                                     l2, R"(, "bias_regularizer": )", l1),
                        {"flat"})}));
  // |w| has a kink at 0: a step of kStep moves one of c/kernel's weights
  // across it (its difference quotient is then off by 0.1), one of kStep /
  // 10 none.
  checker.CheckAll("regularizers", kStep / 10);
}

// Two inputs, float features and ids: the Embedding's table and the
// Dense on the features both learn through a Concatenate.
TEST(GradientCheck, TwoInputsThroughAnEmbeddingAndConcatenate) {
  Checker(Model("3",
                {Dense("d", 4, "x", "tanh"),
                 Layer("Embedding", "emb", R"("input_dim": 6, "output_dim": 3)",
                       {"ids"}),
                 Layer("Flatten", "flat_ids", "", {"emb"}),
                 Layer("Concatenate", "cat", "", {"d", "flat_ids"}),
                 Dense("out", kClasses, "cat")},
                "2"))
      .CheckAll("two inputs");
}

TEST(GradientCheck, NormalizationLayers) {
  for (const char* fields :
       {R"("epsilon": 0.001)", R"("center": false)", R"("scale": false)",
        R"("center": false, "scale": false)"}) {
    Checker(Model("2, 4", Join({Dense("pre", 5, "x"),
                                Layer("LayerNormalization", "ln", fields,
                                      {"pre"})},
                               Head("ln"))))
        .CheckAll(absl::StrCat("LayerNormalization ", fields));
    Checker(Model("2, 4", Join({Dense("pre", 5, "x"),
                                Layer("BatchNormalization", "bn", fields,
                                      {"pre"})},
                               Head("bn"))))
        .CheckAll(absl::StrCat("BatchNormalization ", fields));
  }
}

// The moving statistics' "gradients" are the batch's statistics summed over
// its examples: what the ps averages into its moving averages.
TEST(GradientCheck, BatchNormalizationHandsOnTheBatchStatistics) {
  Checker checker(Model("3", {Layer("BatchNormalization", "bn", "", {"x"}),
                              Dense("out", kClasses, "bn")}));
  checker.CheckAll("BatchNormalization on the input");
  const std::vector<float>& x = checker.features();
  const std::vector<float> mean = checker.Gradient("bn/moving_mean");
  const std::vector<float> variance = checker.Gradient("bn/moving_variance");
  for (int c = 0; c < 3; ++c) {
    double sum = 0, squares = 0;
    for (int b = 0; b < kBatch; ++b) sum += x[b * 3 + c];
    const double m = sum / kBatch;
    for (int b = 0; b < kBatch; ++b) {
      squares += (x[b * 3 + c] - m) * (x[b * 3 + c] - m);
    }
    EXPECT_NEAR(mean[c], sum, 1e-4);
    EXPECT_NEAR(variance[c], squares, 1e-4);  // Biased variance * batch.
  }
}

TEST(GradientCheck, PoolingPaddingAndReshaping) {
  const std::vector<std::pair<std::string, std::string>> layers = {
      {"AveragePooling2D", R"("pool_size": 2)"},
      {"AveragePooling2D", R"("pool_size": 2, "strides": 1, "padding": "same")"},
      {"GlobalAveragePooling2D", ""},
      {"GlobalMaxPooling2D", ""},
      {"GlobalMaxPooling2D", R"("keepdims": true)"},
      {"ZeroPadding2D", R"("padding": [[1, 0], [2, 1]])"},
      {"Permute", R"("dims": [2, 3, 1])"},
      {"Rescaling", R"("scale": 0.5, "offset": -0.25)"},
      {"Reshape", R"("target_shape": [3, -1])"},
  };
  for (const auto& [class_name, fields] : layers) {
    Checker(Model("3, 4, 2",
                  Join({Dense("pre", 3, "x", "tanh"),
                        Layer(class_name, "l", fields, {"pre"})},
                       Head("l"))))
        .CheckAll(absl::StrCat(class_name, " ", fields),
                  class_name == "GlobalMaxPooling2D" ? kStep / 10 : kStep);
  }
  for (const char* class_name :
       {"GlobalAveragePooling1D", "GlobalMaxPooling1D"}) {
    Checker(Model("4, 3", Join({Dense("pre", 3, "x", "tanh"),
                                Layer(class_name, "l", "", {"pre"})},
                               Head("l"))))
        .CheckAll(class_name);
  }
}

// MultiHeadAttention as Keras calls it: self-attention with the value by
// keyword (tf.keras 2.x's form), causal; cross-attention with a key.
TEST(GradientCheck, MultiHeadAttention) {
  const std::string mha = R"("num_heads": 2, "key_dim": 3)";
  const auto attention = [&](const std::string& name,
                             const std::string& node) {
    return absl::StrCat(R"({"class_name": "MultiHeadAttention", "name": ")",
                        name, R"(", "config": {"name": ")", name, "\", ",
                        mha, R"(}, "inbound_nodes": [[)", node, "]]}");
  };
  for (const char* causal : {"false", "true"}) {
    Checker(Model("4, 3",
                  Join({Dense("pre", 5, "x", "tanh"),
                        attention("att",
                                  absl::StrCat(R"(["pre", 0, 0, {"value": )",
                                               R"(["pre", 0, 0], )",
                                               R"("use_causal_mask": )",
                                               causal, "}]"))},
                       Head("att"))))
        .CheckAll(absl::StrCat("self-attention, causal ", causal));
  }
  Checker(Model("4, 3",
                Join({Dense("q", 5, "x", "tanh"), Dense("v", 4, "x"),
                      Dense("k", 6, "x", "tanh"),
                      attention("att", R"(["q", 0, 0, {}], ["v", 0, 0, {}], )"
                                       R"(["k", 0, 0, {}])"),
                      Layer("Add", "res", "", {"att", "q"})},
                     Head("res"))))
      .CheckAll("cross-attention with a key, residual");
}

// A layer called twice shares its variables: their gradient is the sum over
// both calls (dense_a on x, then on its own output; ln on two branches).
TEST(GradientCheck, SharedLayers) {
  const std::string twice = absl::StrCat(
      R"({"class_name": "Dense", "name": "shared", "config": {"name": )",
      R"("shared", "units": 4, "activation": "tanh"}, "inbound_nodes": )",
      R"([[["pre", 0, 0, {}]], [["shared", 0, 0, {}]]]})");
  const std::string second_call = R"({"class_name": "Add", "name": "sum",
      "config": {"name": "sum"}, "inbound_nodes": [[["shared", 1, 0, {}],
      ["pre", 0, 0, {}]]]})";
  Checker(Model("4", Join({Dense("pre", 4, "x"), twice, second_call},
                          Head("sum"))))
      .CheckAll("Dense called twice");
  const std::string ln = R"({"class_name": "LayerNormalization", "name": "ln",
      "config": {"name": "ln"}, "inbound_nodes": [[["a", 0, 0, {}]],
      [["b", 0, 0, {}]]]})";
  const std::string add = R"({"class_name": "Add", "name": "sum",
      "config": {"name": "sum"}, "inbound_nodes": [[["ln", 0, 0, {}],
      ["ln", 1, 0, {}]]]})";
  Checker(Model("2, 4", Join({Dense("a", 3, "x", "tanh"), Dense("b", 3, "x"),
                              ln, add},
                             Head("sum"))))
      .CheckAll("LayerNormalization on two branches");
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

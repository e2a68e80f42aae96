// GpuBackend against CpuBackend (gpu_backend_test_util.h says what is
// compared and to what tolerance) on Functional graphs: branches, merges,
// concatenation, shared layers, two inputs of floats and ids, and every
// layer kind of the plan: each convolution (dilated, depthwise, 1D) and
// regularizer, each activation, merge, pooling, padding,
// Rescaling, Permute, BatchNormalization, LayerNormalization and
// MultiHeadAttention; and what the GPU still refuses.
//
// Without a GPU every test that needs one skips, printing why.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compute/cpu/model_test_util.h"
#include "compute/gpu/gpu_backend.h"
#include "compute/gpu/gpu_backend_test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace {

using cpu::GraphDense;
using cpu::GraphLayer;
using cpu::GraphModel;
using cpu::Init;
using cpu::KerasLayer;
using cpu::KerasModel;
using cpu::kL2Field;
using cpu::MakeVariables;
using cpu::ModelVariables;
using cpu::MustParse;
using gpu_test::Batch;
using gpu_test::CompareGraph;
using gpu_test::CompareTraining;
using gpu_test::HaveGpu;
using gpu_test::Head;
using gpu_test::InputOf;
using gpu_test::Join;
using gpu_test::MakePair;
using gpu_test::Pair;
using gpu_test::RandomBatch;

// A Functional graph: two branches from the input, Add, a Dense called
// twice (shared weights: one variable, gradients summed) and the
// Concatenate of its two calls.
TEST(GpuBackend, FunctionalGraphWithBranchAddConcatenateAndSharedDense) {
  SKIP_WITHOUT_GPU();
  const std::string shared = R"({"class_name": "Dense", "name": "shared",
      "config": {"name": "shared", "units": 5, "activation": "relu"},
      "inbound_nodes": [[["sum", 0, 0, {}]], [["a", 0, 0, {}]]]})";
  const std::string cat = R"({"class_name": "Concatenate", "name": "cat",
      "config": {"name": "cat", "axis": -1}, "inbound_nodes":
      [[["shared", 0, 0, {}], ["shared", 1, 0, {}]]]})";
  CompareGraph(
      "branch, Add, shared Dense, Concatenate",
      GraphModel("4", {GraphDense("a", 5, "x", "tanh"), GraphDense("b", 5, "x"),
                       GraphLayer("Add", "sum", "", {"a", "b"}), shared, cat,
                       GraphDense("out", 3, "cat")}),
      /*mse=*/true);
}

// Two inputs: float features through a Dense, int ids through an
// Embedding, concatenated.
TEST(GpuBackend, TwoInputsOfFloatsAndIdsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  CompareGraph(
      "two inputs",
      GraphModel("3",
                 {GraphDense("d", 4, "x", "tanh"),
                  GraphLayer("Embedding", "emb",
                             R"("input_dim": 6, "output_dim": 3)", {"ids"}),
                  GraphLayer("Flatten", "flat_ids", "", {"emb"}),
                  GraphLayer("Concatenate", "cat", "", {"d", "flat_ids"}),
                  GraphDense("out", 3, "cat")},
                 "2"),
      /*mse=*/true);
}

TEST(GpuBackend, EveryActivationMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const char* activation :
       {"relu", "relu6", "leaky_relu", "softmax", "log_softmax", "gelu",
        "gelu_new", "sigmoid", "hard_sigmoid", "tanh", "silu", "elu", "selu",
        "softplus"}) {
    CompareGraph(
        absl::StrCat("Dense activation ", activation),
        GraphModel("2, 4",
                   Join({GraphDense("pre", 6, "x", activation)}, Head("pre"))));
  }
  const std::vector<std::pair<std::string, std::string>> layers = {
      {"ReLU", R"("max_value": 0.3, "negative_slope": 0.1, "threshold": 0.05)"},
      {"LeakyReLU", R"("negative_slope": 0.2)"},
      {"ELU", R"("alpha": 0.7)"},
      {"Softmax", R"("axis": 1)"},  // Over the first axis of [2, 6].
      {"Activation", R"("activation": "log_softmax")"},
      {"Activation", R"("activation": "swish")"},
  };
  for (const auto& [class_name, fields] : layers) {
    CompareGraph(
        absl::StrCat(class_name, " ", fields),
        GraphModel("2, 4",
                   Join({GraphDense("pre", 6, "x"),
                         GraphLayer(class_name, "act", fields, {"pre"})},
                        Head("act"))));
  }
}

TEST(GpuBackend, EveryMergeMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const char* merge :
       {"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum"}) {
    CompareGraph(merge,
                 GraphModel("4", Join({GraphDense("a", 5, "x", "tanh"),
                                       GraphDense("b", 5, "x"),
                                       GraphLayer(merge, "m", "", {"a", "b"})},
                                      Head("m"))));
  }
  // The same tensor twice among three inputs: its gradient sums both.
  CompareGraph(
      "Multiply(a, b, b)",
      GraphModel("4", Join({GraphDense("a", 5, "x", "sigmoid"),
                            GraphDense("b", 5, "x"),
                            GraphLayer("Multiply", "m", "", {"a", "b", "b"})},
                           Head("m"))));
  CompareGraph(
      "Add(a, b(a), a)",
      GraphModel("4",
                 Join({GraphDense("a", 5, "x", "tanh"), GraphDense("b", 5, "a"),
                       GraphLayer("Add", "m", "", {"a", "b", "a"})},
                      Head("m"))));
  CompareGraph(
      "Concatenate first axis, with the model input",
      GraphModel("2, 4",
                 Join({GraphDense("a", 4, "x", "tanh"), GraphDense("b", 4, "a"),
                       GraphLayer("Concatenate", "c", R"("axis": 1)",
                                  {"a", "b", "x"})},
                      Head("c"))));
}

TEST(GpuBackend, PoolingPaddingRescalingAndPermuteMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::string>> layers = {
      {"AveragePooling2D", R"("pool_size": 2)"},
      {"AveragePooling2D",
       R"("pool_size": 2, "strides": 1, "padding": "same")"},
      {"AveragePooling2D",
       R"("pool_size": 3, "strides": 2, "padding": "same")"},
      {"GlobalAveragePooling2D", ""},
      {"GlobalMaxPooling2D", ""},
      {"GlobalMaxPooling2D", R"("keepdims": true)"},
      {"ZeroPadding2D", R"("padding": [[1, 0], [2, 1]])"},
      {"Permute", R"("dims": [2, 3, 1])"},
      {"Permute", R"("dims": [3, 1, 2])"},
      {"Rescaling", R"("scale": 0.5, "offset": -0.25)"},
  };
  for (const auto& [class_name, fields] : layers) {
    CompareGraph(absl::StrCat(class_name, " ", fields),
                 GraphModel("5, 4, 2",
                            Join({GraphDense("pre", 3, "x", "tanh"),
                                  GraphLayer(class_name, "l", fields, {"pre"})},
                                 Head("l"))));
  }
  for (const char* class_name :
       {"GlobalAveragePooling1D", "GlobalMaxPooling1D"}) {
    CompareGraph(
        class_name,
        GraphModel("4, 3", Join({GraphDense("pre", 3, "x", "tanh"),
                                 GraphLayer(class_name, "l", "", {"pre"})},
                                Head("l"))));
  }
  // As images come: Rescaling first, padding, a convolution, average
  // pooling and a global pool.
  CompareGraph(
      "image pipeline",
      GraphModel(
          "7, 6, 2",
          {GraphLayer("Rescaling", "scale", R"("scale": 0.00392156862)", {"x"}),
           GraphLayer("ZeroPadding2D", "pad", R"("padding": 1)", {"scale"}),
           GraphLayer("Conv2D", "conv",
                      R"("filters": 4, "kernel_size": 3,
                                "activation": "relu")",
                      {"pad"}),
           GraphLayer("AveragePooling2D", "avg",
                      R"("pool_size": 2, "padding": "same")", {"conv"}),
           GraphLayer("GlobalMaxPooling2D", "gmp", "", {"avg"}),
           GraphDense("out", 3, "gmp")}),
      /*mse=*/true);
}

// Dilated Conv2D, DepthwiseConv2D (grouped cuDNN convolutions) and
// Conv1D in every padding (causal: the input copied right of its zeros),
// with L1, L2 and L1L2 regularizers on kernels, a depthwise kernel and
// biases (the penalty and its gradient on cuBLAS and the sign kernel).
TEST(GpuBackend, DilatedDepthwiseConv1DAndRegularizersMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, std::string>> images = {
      {"Conv2D", R"("filters": 3, "kernel_size": 3, "dilation_rate": 2)"},
      {"Conv2D", R"("filters": 2, "kernel_size": [2, 3],
                    "dilation_rate": [2, 1], "padding": "same")"},
      {"DepthwiseConv2D", R"("kernel_size": 3, "padding": "same")"},
      {"DepthwiseConv2D", R"("kernel_size": [2, 3], "depth_multiplier": 2,
                             "strides": 2, "use_bias": false)"},
      {"DepthwiseConv2D", R"("kernel_size": 2, "dilation_rate": 2,
                             "depth_multiplier": 3, "padding": "same")"},
  };
  for (const auto& [class_name, fields] : images) {
    CompareGraph(absl::StrCat(class_name, " ", fields),
                 GraphModel("6, 5, 2",
                            Join({GraphDense("pre", 3, "x", "tanh"),
                                  GraphLayer(class_name, "c", fields, {"pre"})},
                                 Head("c"))));
  }
  for (const char* fields :
       {R"("filters": 3, "kernel_size": 3)",
        R"("filters": 2, "kernel_size": 3, "padding": "same", "strides": 2)",
        R"("filters": 3, "kernel_size": 2, "padding": "causal",
           "dilation_rate": 3)",
        R"("filters": 2, "kernel_size": 3, "padding": "causal",
           "strides": 2, "use_bias": false)"}) {
    CompareGraph(
        absl::StrCat("Conv1D ", fields),
        GraphModel("7, 3", Join({GraphDense("pre", 4, "x", "tanh"),
                                 GraphLayer("Conv1D", "c", fields, {"pre"})},
                                Head("c"))));
  }
  const std::string l1 = R"({"class_name": "L1", "config": {"l1": 0.05}})";
  const std::string l1l2 =
      R"({"class_name": "L1L2", "config": {"l1": 0.02, "l2": 0.04}})";
  CompareGraph(
      "regularizers",
      GraphModel(
          "5, 4, 2",
          Join({GraphLayer("Conv2D", "c",
                           absl::StrCat(R"("filters": 3, "kernel_size": 2,
                                           "kernel_regularizer": )",
                                        l1, R"(, "bias_regularizer": )", l1l2),
                           {"x"}),
                GraphLayer("DepthwiseConv2D", "dw",
                           absl::StrCat(R"("kernel_size": 2, "padding": "same",
                                           "depthwise_regularizer": )",
                                        l1l2),
                           {"c"})},
               Head("dw"))));
}

// BatchNormalization (its moving statistics' "gradients" are the batch's
// statistics times the batch), LayerNormalization in each of its forms,
// and MultiHeadAttention: self-attention (causal or not), cross-attention
// with a key, a LayerNormalization shared by two branches.
TEST(GpuBackend, NormalizationAndAttentionMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const char* fields :
       {R"("epsilon": 0.001)", R"("center": false)", R"("scale": false)",
        R"("center": false, "scale": false)"}) {
    CompareGraph(absl::StrCat("LayerNormalization ", fields),
                 GraphModel("2, 4", Join({GraphDense("pre", 5, "x"),
                                          GraphLayer("LayerNormalization", "ln",
                                                     fields, {"pre"})},
                                         Head("ln"))));
    CompareGraph(absl::StrCat("BatchNormalization ", fields),
                 GraphModel("2, 4", Join({GraphDense("pre", 5, "x"),
                                          GraphLayer("BatchNormalization", "bn",
                                                     fields, {"pre"})},
                                         Head("bn"))));
  }
  CompareGraph(
      "BatchNormalization on the input",
      GraphModel("3", {GraphLayer("BatchNormalization", "bn", "", {"x"}),
                       GraphDense("out", 3, "bn")}),
      /*mse=*/true);
  const std::string mha = R"("num_heads": 2, "key_dim": 3)";
  const auto attention = [&](const std::string& name, const std::string& node) {
    return absl::StrCat(R"({"class_name": "MultiHeadAttention", "name": ")",
                        name, R"(", "config": {"name": ")", name, "\", ", mha,
                        R"(}, "inbound_nodes": [[)", node, "]]}");
  };
  for (const char* causal : {"false", "true"}) {
    CompareGraph(
        absl::StrCat("self-attention, causal ", causal),
        GraphModel(
            "4, 3",
            Join({GraphDense("pre", 5, "x", "tanh"),
                  attention("att", absl::StrCat(R"(["pre", 0, 0, {"value": )",
                                                R"(["pre", 0, 0], )",
                                                R"("use_causal_mask": )",
                                                causal, "}]"))},
                 Head("att"))));
  }
  CompareGraph(
      "cross-attention with a key, residual",
      GraphModel("4, 3",
                 Join({GraphDense("q", 5, "x", "tanh"), GraphDense("v", 4, "x"),
                       GraphDense("k", 6, "x", "tanh"),
                       attention("att", R"(["q", 0, 0, {}], ["v", 0, 0, {}], )"
                                        R"(["k", 0, 0, {}])"),
                       GraphLayer("Add", "res", "", {"att", "q"})},
                      Head("res"))),
      /*mse=*/true);
  const std::string ln = R"({"class_name": "LayerNormalization", "name": "ln",
      "config": {"name": "ln"}, "inbound_nodes": [[["a", 0, 0, {}]],
      [["b", 0, 0, {}]]]})";
  const std::string add = R"({"class_name": "Add", "name": "sum",
      "config": {"name": "sum"}, "inbound_nodes": [[["ln", 0, 0, {}],
      ["ln", 1, 0, {}]]]})";
  CompareGraph("LayerNormalization on two branches",
               GraphModel("2, 4", Join({GraphDense("a", 3, "x", "tanh"),
                                        GraphDense("b", 3, "x"), ln, add},
                                       Head("sum"))));
}

TEST(GpuBackend, WhatTheGpuLacksIsUnimplementedNamingTheLayer) {
  // Refused before any GPU is touched: this runs without one too.
  std::vector<std::string> reads(17, "a");
  const ModelSpec spec = MustParse(GraphModel(
      "4", Join({GraphDense("a", 3, "x"), GraphLayer("Add", "m", "", reads)},
                Head("m"))));
  const absl::Status status =
      CreateGpuBackend(spec, GpuBackendOptions()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_EQ(status.message(),
            "layer 'm': a merge of 17 inputs; the GPU merges at most 16");
}

TEST(GpuBackend, BadIdsOfASecondInputNameTheInput) {
  SKIP_WITHOUT_GPU();
  const ModelSpec spec = MustParse(
      GraphModel("3",
                 {GraphDense("d", 4, "x", "tanh"),
                  GraphLayer("Embedding", "emb",
                             R"("input_dim": 6, "output_dim": 3)", {"ids"}),
                  GraphLayer("Flatten", "flat_ids", "", {"emb"}),
                  GraphLayer("Concatenate", "cat", "", {"d", "flat_ids"}),
                  GraphDense("out", 3, "cat")},
                 "2"));
  Pair pair = MakePair(spec, LossKind::kSparseCrossEntropy);
  ASSERT_NE(pair.gpu, nullptr);
  ModelVariables vars = MakeVariables(spec, Init::kKeras, 3);
  Batch batch = RandomBatch(spec, 4, 5);
  batch.features[2 * 5 + 4] = 6;  // Example 2, second id: one past the table.
  const absl::Status status =
      pair.gpu
          ->TrainStep(InputOf(batch, 4, 0), vars.weight_map, &vars.gradient_map)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("input 1: "), std::string::npos) << status;
  EXPECT_NE(status.message().find("id 6 at position 5"), std::string::npos)
      << status;
}

}  // namespace
}  // namespace worker
}  // namespace pstrain

#include "compute/loss_config.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {
namespace {

// A tf.keras 2 Sequential model on 4 features: Dense(8, relu), then
// Dense(units, activation), then `extra` layers (JSON, each with a leading
// comma).
ModelSpec Model(int units, const std::string& activation,
                const std::string& extra = "") {
  const std::string json =
      R"({"class_name": "Sequential", "config": {"name": "m", "layers": [
      {"class_name": "InputLayer", "config": {"name": "in",
        "batch_input_shape": [null, 4]}},
      {"class_name": "Dense", "config": {"name": "hidden", "units": 8,
        "activation": "relu"}},
      {"class_name": "Dense", "config": {"name": "out", "units": )" +
      std::to_string(units) + R"(, "activation": ")" + activation + R"("}})" +
      extra + "]}}";
  absl::StatusOr<ModelSpec> spec = ParseKerasModel(json, 1);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ModelSpec();
}

ModelSpec Shipped(const char* name) {
  absl::StatusOr<ModelSpec> spec = LoadModel(name, 1);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ModelSpec();
}

TEST(LossConfig, ParsesKerasNamesAndRefusesOthers) {
  EXPECT_EQ(*ParseLossName("sparse_categorical_crossentropy"),
            LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY);
  EXPECT_EQ(*ParseLossName("categorical_crossentropy"),
            LossConfig::CATEGORICAL_CROSSENTROPY);
  EXPECT_EQ(*ParseLossName("binary_crossentropy"),
            LossConfig::BINARY_CROSSENTROPY);
  EXPECT_EQ(*ParseLossName("mse"), LossConfig::MEAN_SQUARED_ERROR);
  EXPECT_EQ(*ParseLossName("mean_squared_error"),
            LossConfig::MEAN_SQUARED_ERROR);
  EXPECT_EQ(*ParseLossName("mae"), LossConfig::MEAN_ABSOLUTE_ERROR);
  EXPECT_EQ(*ParseLossName("mean_absolute_error"),
            LossConfig::MEAN_ABSOLUTE_ERROR);
  EXPECT_EQ(*ParseLossName("huber"), LossConfig::HUBER);
  const absl::Status bad = CheckLossFlags("hinge", false);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(),
            "--loss: \"hinge\" is not sparse_categorical_crossentropy, "
            "categorical_crossentropy, binary_crossentropy, mse, mae or huber");
}

TEST(LossConfig, FromLogitsOnlyWithACrossEntropy) {
  EXPECT_TRUE(CheckLossFlags("", true).ok());
  EXPECT_TRUE(CheckLossFlags("binary_crossentropy", true).ok());
  const absl::Status mse = CheckLossFlags("mse", true);
  EXPECT_EQ(mse.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(mse.message(),
            "--from_logits: applies to the cross-entropy losses only, not to "
            "--loss=mse");
}

TEST(LossConfig, FinalActivationIsTheOutputLayers) {
  EXPECT_EQ(FinalActivation(Shipped("mlp")), OutputActivation::kSoftmax);
  EXPECT_EQ(FinalActivation(Shipped("cnn")), OutputActivation::kOther);
  EXPECT_EQ(FinalActivation(Model(1, "sigmoid")), OutputActivation::kSigmoid);
  EXPECT_EQ(FinalActivation(Model(3, "tanh")), OutputActivation::kOther);
  // A final Activation layer counts as the output layer's activation.
  EXPECT_EQ(FinalActivation(Model(3, "linear", R"(,
      {"class_name": "Activation", "config": {"name": "probs",
        "activation": "softmax"}})")),
            OutputActivation::kSoftmax);
}

TEST(LossConfig, DefaultFollowsTheOutputLayer) {
  // A final softmax: sparse categorical cross-entropy, from probabilities.
  absl::StatusOr<LossConfig> softmax =
      ChooseLoss(Model(3, "softmax"), "m.json", "", false);
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  EXPECT_EQ(softmax->kind(), LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY);
  EXPECT_FALSE(softmax->from_logits());
  // One sigmoid unit: binary cross-entropy.
  absl::StatusOr<LossConfig> sigmoid =
      ChooseLoss(Model(1, "sigmoid"), "m.json", "", false);
  ASSERT_TRUE(sigmoid.ok()) << sigmoid.status();
  EXPECT_EQ(sigmoid->kind(), LossConfig::BINARY_CROSSENTROPY);
  // The shipped cnn ends in logits, compiled with from_logits=True.
  absl::StatusOr<LossConfig> cnn = ChooseLoss(Shipped("cnn"), "cnn", "", false);
  ASSERT_TRUE(cnn.ok()) << cnn.status();
  EXPECT_EQ(cnn->kind(), LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY);
  EXPECT_TRUE(cnn->from_logits());
}

TEST(LossConfig, RefusesToGuessForAnyOtherOutput) {
  const absl::Status linear =
      ChooseLoss(Model(10, "linear"), "m.json", "", false).status();
  EXPECT_EQ(linear.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(linear.message(),
            "--loss: not given, and the model's output layer 'out' (linear, "
            "10 units) is neither a softmax nor a single sigmoid unit, so the "
            "loss cannot be told from it: pass --loss "
            "(sparse_categorical_crossentropy, categorical_crossentropy, "
            "binary_crossentropy, mse, mae or huber) and --from_logits as the "
            "model was compiled");
  // Several sigmoid units are several binary labels: not ours to guess.
  const absl::Status sigmoids =
      ChooseLoss(Model(3, "sigmoid"), "m.json", "", false).status();
  EXPECT_NE(sigmoids.message().find("'out' (sigmoid, 3 units)"),
            absl::string_view::npos)
      << sigmoids;
  // With --loss, any output.
  absl::StatusOr<LossConfig> mse =
      ChooseLoss(Model(10, "linear"), "m.json", "mse", false);
  ASSERT_TRUE(mse.ok()) << mse.status();
  EXPECT_EQ(mse->kind(), LossConfig::MEAN_SQUARED_ERROR);
}

TEST(LossConfig, RefusesALossTheOutputCannotTake) {
  const absl::Status binary =
      ChooseLoss(Model(10, "softmax"), "m.json", "binary_crossentropy", false)
          .status();
  EXPECT_EQ(binary.message(),
            "--loss=binary_crossentropy: the model's output has 10 units; "
            "binary cross-entropy takes one output unit per example and "
            "labels 0 or 1 (for one unit per class: "
            "--loss=sparse_categorical_crossentropy)");
  const absl::Status categorical = ChooseLoss(Model(1, "sigmoid"), "m.json",
                                              "categorical_crossentropy", false)
                                       .status();
  EXPECT_EQ(categorical.message(),
            "--loss=categorical_crossentropy: the model's output has 1 unit; "
            "a cross-entropy over classes needs one unit per class (for one "
            "sigmoid unit: --loss=binary_crossentropy)");
}

TEST(LossConfig, LabelsMustFitTheLoss) {
  LossConfig binary;
  binary.set_kind(LossConfig::BINARY_CROSSENTROPY);
  const std::vector<int32_t> labels = {0, 1, 2};
  const absl::Status status =
      CheckLabelsFitLoss(binary, Model(1, "sigmoid"), labels, "the test data");
  EXPECT_EQ(status.message(),
            "--loss=binary_crossentropy: label 2 of example 2 of the test "
            "data is not 0 or 1 (binary cross-entropy takes labels 0 and 1)");
  LossConfig sparse;
  sparse.set_kind(LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY);
  EXPECT_TRUE(
      CheckLabelsFitLoss(sparse, Model(3, "softmax"), labels, "x").ok());
  EXPECT_EQ(
      CheckLabelsFitLoss(sparse, Model(2, "softmax"), labels, "x").message(),
      "--loss=sparse_categorical_crossentropy: label 2 of example 2 of x is "
      "not one of the model's 2 output classes [0, 2)");
  // mse on one unit: the label is the target, whatever it is.
  LossConfig mse;
  mse.set_kind(LossConfig::MEAN_SQUARED_ERROR);
  EXPECT_TRUE(CheckLabelsFitLoss(mse, Model(1, "linear"), {7, -3}, "x").ok());
  EXPECT_FALSE(CheckLabelsFitLoss(mse, Model(3, "softmax"), {7}, "x").ok());
}

TEST(LossConfig, BackendLossAndPlan) {
  LossConfig config;
  BackendLoss legacy = ToBackendLoss(config);  // KIND_UNSPECIFIED
  EXPECT_EQ(legacy.kind, LossKind::kSparseCrossEntropy);
  EXPECT_EQ(legacy.input, LossInput::kLogits);
  config.set_kind(LossConfig::HUBER);
  EXPECT_EQ(ToBackendLoss(config).kind, LossKind::kHuber);
  config.set_kind(LossConfig::BINARY_CROSSENTROPY);
  config.set_from_logits(true);
  EXPECT_EQ(ToBackendLoss(config).kind, LossKind::kBinaryCrossEntropy);
  EXPECT_EQ(ToBackendLoss(config).input, LossInput::kLogits);

  const ModelSpec softmax = Model(3, "softmax");
  const ModelSpec linear = Model(3, "linear");
  const ModelSpec sigmoid = Model(1, "sigmoid");
  struct Case {
    const ModelSpec* spec;
    LossKind kind;
    LossInput input;
    bool strip, logits;
  } cases[] = {
      // A final softmax or sigmoid: the logits behind it, exactly, whatever
      // from_logits says (tf.keras's _get_logits), and for every
      // cross-entropy.
      {&softmax, LossKind::kSparseCrossEntropy, LossInput::kProbabilities, true,
       true},
      {&softmax, LossKind::kCategoricalCrossEntropy, LossInput::kLogits, true,
       true},
      {&sigmoid, LossKind::kBinaryCrossEntropy, LossInput::kProbabilities, true,
       true},
      {&sigmoid, LossKind::kBinaryCrossEntropy, LossInput::kLogits, true, true},
      {&sigmoid, LossKind::kSparseCrossEntropy, LossInput::kProbabilities, true,
       true},
      // Any other output: clipped probabilities, or the logits.
      {&linear, LossKind::kSparseCrossEntropy, LossInput::kProbabilities, false,
       false},
      {&linear, LossKind::kBinaryCrossEntropy, LossInput::kLogits, false, true},
      // mse computes the whole model.
      {&softmax, LossKind::kMeanSquaredError, LossInput::kProbabilities, false,
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(&c - cases);
    const LossPlan plan = PlanLoss(*c.spec, c.kind, c.input);
    EXPECT_EQ(plan.strip_final_activation, c.strip);
    EXPECT_EQ(plan.output_is_logits, c.logits);
  }
}

TEST(LossConfig, DescribesWhatIsComputed) {
  LossConfig config;
  config.set_kind(LossConfig::SPARSE_CATEGORICAL_CROSSENTROPY);
  EXPECT_EQ(DescribeLoss(Model(3, "softmax"), config),
            "sparse_categorical_crossentropy (from_logits=false: computed "
            "from the logits behind the final softmax, exactly, as tf.keras "
            "does); metrics: accuracy");
  EXPECT_EQ(DescribeLoss(Model(3, "linear"), config),
            "sparse_categorical_crossentropy (from_logits=false: the output "
            "is taken for probabilities, clipped to [1e-7, 1 - 1e-7] as Keras "
            "does); metrics: accuracy");
  config.set_kind(LossConfig::BINARY_CROSSENTROPY);
  config.set_from_logits(true);
  EXPECT_EQ(DescribeLoss(Model(1, "linear"), config),
            "binary_crossentropy (from_logits=true: the model's output is "
            "the logits); metrics: binary accuracy (probability > 0.5) and "
            "AUC (exact, over the whole test set)");
  EXPECT_EQ(DescribeLoss(Model(1, "sigmoid"), config),
            "binary_crossentropy (from_logits=true: computed from the logits "
            "behind the final sigmoid, exactly, as tf.keras does; tf.keras "
            "warns that such an output does not represent logits, and reads "
            "behind it all the same); metrics: binary accuracy (probability "
            "> 0.5) and AUC (exact, over the whole test set)");
  config.set_kind(LossConfig::MEAN_SQUARED_ERROR);
  config.set_from_logits(false);
  EXPECT_EQ(DescribeLoss(Model(10, "softmax"), config),
            "mse against the one-hot rows of the label; metrics: accuracy");
}

}  // namespace
}  // namespace worker
}  // namespace pstrain

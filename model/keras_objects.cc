#include "model/keras_objects.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {

using Json = nlohmann::json;

namespace {

using VarianceScaling = Initializer::VarianceScaling;

// The initializers pstrain has, by the class name that Keras 3, tf.keras 2
// and TensorFlow.js write, and the snake_case identifier Keras also reads
// (TF.js writes Glorot, He and LeCun as VarianceScaling with their
// parameters, and only class names).
struct KerasInitializer {
  absl::string_view class_name;
  absl::string_view snake_name;
};
constexpr KerasInitializer kInitializers[] = {
    {"GlorotUniform", "glorot_uniform"},
    {"GlorotNormal", "glorot_normal"},
    {"HeUniform", "he_uniform"},
    {"HeNormal", "he_normal"},
    {"LecunUniform", "lecun_uniform"},
    {"LecunNormal", "lecun_normal"},
    {"VarianceScaling", "variance_scaling"},
    {"RandomUniform", "random_uniform"},
    {"RandomNormal", "random_normal"},
    {"TruncatedNormal", "truncated_normal"},
    {"Orthogonal", "orthogonal"},
    {"Identity", "identity"},
    {"Zeros", "zeros"},
    {"Ones", "ones"},
    {"Constant", "constant"},
};

// Other names Keras reads for them: short aliases (both versions), the class
// name Keras 3.0 to 3.6 wrote for Orthogonal, and Keras 3's alias for
// Identity.
struct Alias {
  absl::string_view name;
  absl::string_view class_name;
};
constexpr Alias kAliases[] = {
    {"normal", "RandomNormal"},
    {"uniform", "RandomUniform"},
    {"one", "Ones"},
    {"zero", "Zeros"},
    {"IdentityInitializer", "Identity"},
    {"OrthogonalInitializer", "Orthogonal"},
};

// The class name of the initializer Keras reads as `name`; "" if pstrain has
// none. tf.keras 2 also reads its compatibility names, "<name>V2".
absl::string_view ClassName(absl::string_view name) {
  for (const Alias& alias : kAliases) {
    if (name == alias.name) return alias.class_name;
  }
  absl::ConsumeSuffix(&name, "V2");
  for (const KerasInitializer& init : kInitializers) {
    if (name == init.class_name || name == init.snake_name) {
      return init.class_name;
    }
  }
  return "";
}

std::string SupportedNames() {
  std::vector<absl::string_view> names;
  for (const KerasInitializer& init : kInitializers) {
    names.push_back(init.class_name);
  }
  return absl::StrCat("supported: ", absl::StrJoin(names, ", "),
                      ", or their snake_case names");
}

// Field `key` of `config` as a float, `fallback` when absent or null: finite
// once rounded to float and, when `positive`, > 0.
absl::StatusOr<float> FloatField(const KerasFields& config,
                                 absl::string_view key, double fallback,
                                 bool positive) {
  PSTRAIN_ASSIGN_OR_RETURN(const double value, config.Number(key, fallback));
  if (positive && !(value > 0)) {
    return config.FieldError(key, absl::StrCat(value, " is not > 0"));
  }
  const float rounded = static_cast<float>(value);
  if (!std::isfinite(rounded)) {
    return config.FieldError(key,
                             absl::StrCat(value, " is out of float range"));
  }
  if (positive && !(rounded > 0)) {
    return config.FieldError(key, absl::StrCat(value, " is 0 as a float"));
  }
  return rounded;
}

// Keras 3's VarianceScaling family takes input_axes and output_axes to
// compute its fans from; pstrain computes them from the shape, as Keras does
// when both are null.
absl::Status ExpectShapeFans(const KerasFields& config) {
  PSTRAIN_RETURN_IF_ERROR(config.ExpectNull("input_axes"));
  return config.ExpectNull("output_axes");
}

absl::Status ParseVarianceScaling(const KerasFields& config,
                                  VarianceScaling* out) {
  PSTRAIN_ASSIGN_OR_RETURN(const float scale,
                           FloatField(config, "scale", 1.0, true));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string mode,
                           config.String("mode", "fan_in"));
  PSTRAIN_ASSIGN_OR_RETURN(const std::string distribution,
                           config.String("distribution", "truncated_normal"));
  out->set_scale(scale);
  if (mode == "fan_in") {
    out->set_mode(VarianceScaling::FAN_IN);
  } else if (mode == "fan_out") {
    out->set_mode(VarianceScaling::FAN_OUT);
  } else if (mode == "fan_avg") {
    out->set_mode(VarianceScaling::FAN_AVG);
  } else {
    return config.Unsupported("mode", Json(mode),
                              R"(expected "fan_in", "fan_out" or "fan_avg")");
  }
  // Keras lowercases the distribution and reads "normal" (what Keras 2 and
  // TF.js write for it) as "truncated_normal".
  const std::string lower = absl::AsciiStrToLower(distribution);
  if (lower == "truncated_normal" || lower == "normal") {
    out->set_distribution(VarianceScaling::TRUNCATED_NORMAL);
  } else if (lower == "untruncated_normal") {
    out->set_distribution(VarianceScaling::UNTRUNCATED_NORMAL);
  } else if (lower == "uniform") {
    out->set_distribution(VarianceScaling::UNIFORM);
  } else {
    return config.Unsupported("distribution", Json(distribution),
                              R"(expected "truncated_normal", )"
                              R"("untruncated_normal", "uniform" or "normal")");
  }
  return ExpectShapeFans(config);
}

// Glorot, He and LeCun: VarianceScaling with Keras's fixed parameters.
absl::Status SetVarianceScaling(const KerasFields& config, float scale,
                                VarianceScaling::Mode mode,
                                VarianceScaling::Distribution distribution,
                                Initializer* init) {
  VarianceScaling* v = init->mutable_variance_scaling();
  v->set_scale(scale);
  v->set_mode(mode);
  v->set_distribution(distribution);
  return ExpectShapeFans(config);
}

}  // namespace

// The initializer in field `key`, `fallback` when absent or null. Keras's
// "seed" is ignored: AddVariable sets the seed.
absl::StatusOr<Initializer> ParseInitializer(const KerasFields& fields,
                                             absl::string_view key,
                                             const Initializer& fallback) {
  PSTRAIN_ASSIGN_OR_RETURN(KerasObject object, fields.Object(key));
  if (object.class_name.empty()) return fallback;
  const KerasFields config = fields.Nested(*object.config, key);
  const absl::string_view name = ClassName(object.class_name);
  Initializer init;
  if (name == "GlorotUniform") {
    // Its own kind (older than VarianceScaling here), with the same values
    // as VarianceScaling(1, fan_avg, uniform).
    PSTRAIN_RETURN_IF_ERROR(ExpectShapeFans(config));
    init.mutable_glorot_uniform();
  } else if (name == "GlorotNormal") {
    PSTRAIN_RETURN_IF_ERROR(
        SetVarianceScaling(config, 1, VarianceScaling::FAN_AVG,
                           VarianceScaling::TRUNCATED_NORMAL, &init));
  } else if (name == "HeUniform") {
    PSTRAIN_RETURN_IF_ERROR(SetVarianceScaling(
        config, 2, VarianceScaling::FAN_IN, VarianceScaling::UNIFORM, &init));
  } else if (name == "HeNormal") {
    PSTRAIN_RETURN_IF_ERROR(
        SetVarianceScaling(config, 2, VarianceScaling::FAN_IN,
                           VarianceScaling::TRUNCATED_NORMAL, &init));
  } else if (name == "LecunUniform") {
    PSTRAIN_RETURN_IF_ERROR(SetVarianceScaling(
        config, 1, VarianceScaling::FAN_IN, VarianceScaling::UNIFORM, &init));
  } else if (name == "LecunNormal") {
    PSTRAIN_RETURN_IF_ERROR(
        SetVarianceScaling(config, 1, VarianceScaling::FAN_IN,
                           VarianceScaling::TRUNCATED_NORMAL, &init));
  } else if (name == "VarianceScaling") {
    PSTRAIN_RETURN_IF_ERROR(
        ParseVarianceScaling(config, init.mutable_variance_scaling()));
  } else if (name == "Zeros") {
    init.mutable_zeros();
  } else if (name == "Ones") {
    init.mutable_constant()->set_value(1.0f);
  } else if (name == "Constant") {
    PSTRAIN_ASSIGN_OR_RETURN(const float value,
                             FloatField(config, "value", 0.0, false));
    init.mutable_constant()->set_value(value);
  } else if (name == "RandomUniform") {
    PSTRAIN_ASSIGN_OR_RETURN(double minval, config.Number("minval", -0.05));
    PSTRAIN_ASSIGN_OR_RETURN(double maxval, config.Number("maxval", 0.05));
    auto* uniform = init.mutable_random_uniform();
    uniform->set_minval(static_cast<float>(minval));
    uniform->set_maxval(static_cast<float>(maxval));
    if (!(uniform->minval() < uniform->maxval())) {
      return config.FieldError(
          "maxval", absl::StrCat(maxval, " is not above minval ", minval));
    }
  } else if (name == "RandomNormal" || name == "TruncatedNormal") {
    PSTRAIN_ASSIGN_OR_RETURN(const float mean,
                             FloatField(config, "mean", 0.0, false));
    PSTRAIN_ASSIGN_OR_RETURN(const float stddev,
                             FloatField(config, "stddev", 0.05, true));
    if (name == "RandomNormal") {
      init.mutable_random_normal()->set_mean(mean);
      init.mutable_random_normal()->set_stddev(stddev);
    } else {
      init.mutable_truncated_normal()->set_mean(mean);
      init.mutable_truncated_normal()->set_stddev(stddev);
    }
  } else if (name == "Orthogonal") {
    PSTRAIN_ASSIGN_OR_RETURN(const float gain,
                             FloatField(config, "gain", 1.0, false));
    init.mutable_orthogonal()->set_gain(gain);
  } else if (name == "Identity") {
    PSTRAIN_ASSIGN_OR_RETURN(const float gain,
                             FloatField(config, "gain", 1.0, false));
    init.mutable_identity()->set_gain(gain);
  } else {
    return fields.Unsupported(key, *fields.Find(key), SupportedNames());
  }
  return init;
}

absl::StatusOr<Regularizer> ParseRegularizer(const KerasFields& fields,
                                             absl::string_view key) {
  PSTRAIN_ASSIGN_OR_RETURN(KerasObject object, fields.Object(key));
  if (object.class_name.empty()) return Regularizer();
  const KerasFields config = fields.Nested(*object.config, key);
  const std::string& name = object.class_name;
  double l1 = 0;
  double l2 = 0;
  if (name == "L1" || name == "l1") {
    PSTRAIN_ASSIGN_OR_RETURN(l1, config.Number("l1", 0.01));
  } else if (name == "L2" || name == "l2") {
    PSTRAIN_ASSIGN_OR_RETURN(l2, config.Number("l2", 0.01));
  } else if (name == "L1L2" || name == "l1_l2") {
    PSTRAIN_ASSIGN_OR_RETURN(l1, config.Number("l1", 0.0));
    PSTRAIN_ASSIGN_OR_RETURN(l2, config.Number("l2", 0.0));
  } else {
    return fields.Unsupported(key, *fields.Find(key),
                              "supported: L1, L2, L1L2");
  }
  if (l1 < 0) return config.FieldError("l1", absl::StrCat(l1, " is negative"));
  if (l2 < 0) return config.FieldError("l2", absl::StrCat(l2, " is negative"));
  Regularizer regularizer;
  regularizer.l1 = static_cast<float>(l1);
  regularizer.l2 = static_cast<float>(l2);
  return regularizer;
}

}  // namespace worker
}  // namespace pstrain

#include "worker/model/keras_objects.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {

using Json = nlohmann::json;

// The initializer in field `key`, `fallback` when absent or null. Keras's
// "seed" is ignored: AddVariable sets the seed.
absl::StatusOr<Initializer> ParseInitializer(const KerasFields& fields,
                                             absl::string_view key,
                                             const Initializer& fallback) {
  PSTRAIN_ASSIGN_OR_RETURN(KerasObject object, fields.Object(key));
  if (object.class_name.empty()) return fallback;
  const KerasFields config = fields.Nested(*object.config, key);
  const std::string& name = object.class_name;
  Initializer init;
  if (name == "GlorotUniform" || name == "glorot_uniform") {
    init.mutable_glorot_uniform();
  } else if (name == "Zeros" || name == "zeros") {
    init.mutable_zeros();
  } else if (name == "Constant" || name == "constant") {
    PSTRAIN_ASSIGN_OR_RETURN(double value, config.Number("value", 0.0));
    init.mutable_constant()->set_value(static_cast<float>(value));
  } else if (name == "RandomUniform" || name == "random_uniform") {
    PSTRAIN_ASSIGN_OR_RETURN(double minval, config.Number("minval", -0.05));
    PSTRAIN_ASSIGN_OR_RETURN(double maxval, config.Number("maxval", 0.05));
    auto* uniform = init.mutable_random_uniform();
    uniform->set_minval(static_cast<float>(minval));
    uniform->set_maxval(static_cast<float>(maxval));
    if (!(uniform->minval() < uniform->maxval())) {
      return config.FieldError(
          "maxval", absl::StrCat(maxval, " is not above minval ", minval));
    }
  } else if (name == "TruncatedNormal" || name == "truncated_normal") {
    PSTRAIN_ASSIGN_OR_RETURN(double mean, config.Number("mean", 0.0));
    PSTRAIN_ASSIGN_OR_RETURN(double stddev, config.Number("stddev", 0.05));
    auto* normal = init.mutable_truncated_normal();
    normal->set_mean(static_cast<float>(mean));
    normal->set_stddev(static_cast<float>(stddev));
    if (!(normal->stddev() > 0)) {
      return config.FieldError("stddev", absl::StrCat(stddev, " is not > 0"));
    }
  } else {
    return fields.Unsupported(key, *fields.Find(key),
                              "supported: GlorotUniform, Zeros, Constant, "
                              "RandomUniform, TruncatedNormal");
  }
  return init;
}

// The L2 factor of the regularizer in field `key`; 0 when absent or null.
absl::StatusOr<float> ParseL2(const KerasFields& fields,
                              absl::string_view key) {
  PSTRAIN_ASSIGN_OR_RETURN(KerasObject object, fields.Object(key));
  if (object.class_name.empty()) return 0.0f;
  const KerasFields config = fields.Nested(*object.config, key);
  double l2 = 0;
  if (object.class_name == "L2" || object.class_name == "l2") {
    PSTRAIN_ASSIGN_OR_RETURN(l2, config.Number("l2", 0.01));
  } else if (object.class_name == "L1L2" || object.class_name == "l1_l2") {
    PSTRAIN_ASSIGN_OR_RETURN(const double l1, config.Number("l1", 0.0));
    if (l1 != 0) {
      return config.Unsupported("l1", Json(l1),
                                "expected 0: only L2 penalties are");
    }
    PSTRAIN_ASSIGN_OR_RETURN(l2, config.Number("l2", 0.0));
  } else {
    return fields.Unsupported(key, *fields.Find(key),
                              "supported: L2, and L1L2 with l1 = 0");
  }
  if (l2 < 0) return config.FieldError("l2", absl::StrCat(l2, " is negative"));
  return static_cast<float>(l2);
}

}  // namespace worker
}  // namespace pstrain

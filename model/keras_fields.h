// Reads the fields of one Keras config object (a layer's "config", an
// initializer's "config") with Keras's defaults, and words every problem as
// one INVALID_ARGUMENT line naming where it is and the field:
//
//   KerasFields fields(layer_json["config"],
//                      "model: layer 1 'conv2d' (Conv2D): ");
//   PSTRAIN_ASSIGN_OR_RETURN(int64_t filters,
//                            fields.Int("filters", 1, kMaxInt, std::nullopt));
//   // On a string: model: layer 1 'conv2d' (Conv2D): filters: expected an
//   // integer, got a string
//
// Keras writes null for "the default", so an absent and a null field read
// alike: the fallback when one is given, else "missing" / "got null".
// A helper of keras_model.
#ifndef PSTRAIN_MODEL_KERAS_FIELDS_H_
#define PSTRAIN_MODEL_KERAS_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {

class KerasFields;

// A nested Keras object ({"class_name": "L2", "config": {...}}) as read by
// KerasFields::Object.
struct KerasObject {
  // "" when the field is absent or null.
  std::string class_name;
  // The object's config ({} when it has none). Refers into the JSON.
  const nlohmann::json* config = nullptr;
};

class KerasFields {
 public:
  // `object` must be a JSON object and outlive this. `where` starts every
  // error; `path` prefixes field names in them ("kernel_initializer.config.").
  KerasFields(const nlohmann::json& object, std::string where,
              std::string path = "");

  // The fields of `object`, a nested config found through field `key` of this
  // one, so that errors name it "key.config.<field>".
  KerasFields Nested(const nlohmann::json& object, absl::string_view key) const;

  // The value of `key`, or nullptr when absent or null.
  const nlohmann::json* Find(absl::string_view key) const;

  // "<where><problem>" as INVALID_ARGUMENT.
  absl::Status Error(absl::string_view problem) const;
  // "<where><path><key>: <problem>" as INVALID_ARGUMENT.
  absl::Status FieldError(absl::string_view key,
                          absl::string_view problem) const;
  // "<where><path><key> <value> is not supported (<expected>)", e.g.
  // padding "causal" is not supported (expected "valid" or "same").
  absl::Status Unsupported(absl::string_view key, const nlohmann::json& value,
                           absl::string_view expected) const;

  // An integer in [min, max]; `fallback` when absent or null.
  absl::StatusOr<int64_t> Int(absl::string_view key, int64_t min, int64_t max,
                              std::optional<int64_t> fallback) const;
  // A finite number; `fallback` when absent or null.
  absl::StatusOr<double> Number(absl::string_view key,
                                std::optional<double> fallback) const;
  absl::StatusOr<bool> Bool(absl::string_view key, bool fallback) const;
  absl::StatusOr<std::string> String(absl::string_view key,
                                     std::optional<std::string> fallback) const;
  // Keras's kernel_size, strides, pool_size: an integer n (meaning n x n) or
  // a list of two, each in [1, 2^31 - 1].
  absl::StatusOr<std::pair<int, int>> IntPair(
      absl::string_view key, std::optional<std::pair<int, int>> fallback) const;
  // A Keras object: {"class_name": ..., "config": {...}} as both Keras
  // versions write it, or a bare string identifier ("glorot_uniform") taken
  // as its class name. Refuses custom objects (a "registered_name" other
  // than the class name, or a "module" outside keras).
  absl::StatusOr<KerasObject> Object(absl::string_view key) const;
  // OK when this object (a layer or a nested object) is Keras's own
  // `class_name`: its "registered_name" is absent, null or the class name,
  // and its "module" absent, "keras" or "keras.*". Custom classes registered
  // under Keras names would otherwise pass for built-in ones.
  absl::Status ExpectKerasClass(absl::string_view class_name) const;
  // OK when `key` is absent or null; else "<key> <value> is not supported
  // (expected null)": options pstrain does not implement (constraints, ...).
  absl::Status ExpectNull(absl::string_view key) const;

 private:
  // The value of `key` (nullptr when absent or null), or "missing" / "got
  // null" when `required`. `expected` names the type for that message.
  absl::StatusOr<const nlohmann::json*> Get(absl::string_view key,
                                            absl::string_view expected,
                                            bool required) const;
  absl::Status TypeError(absl::string_view key, absl::string_view expected,
                         const nlohmann::json& value) const;

  const nlohmann::json& object_;
  std::string where_;
  std::string path_;
};

// Whether `value` is a JSON integer in [min, max] (nlohmann reads
// non-negative integers as unsigned, negative ones as signed).
bool IsIntegerIn(const nlohmann::json& value, int64_t min, int64_t max);

// A value as messages quote it: "causal" for a string, the class name of a
// Keras object (L1), the JSON of a number, list or bool ([2, 2]).
std::string DescribeJson(const nlohmann::json& value);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_MODEL_KERAS_FIELDS_H_

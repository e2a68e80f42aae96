#include "model/keras_fields.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/json_util.h"
#include "common/status_macros.h"

namespace pstrain {
namespace worker {
namespace {

using Json = nlohmann::json;

const Json& EmptyObject() {
  static const Json* const empty = new Json(Json::object());
  return *empty;
}

}  // namespace

bool IsIntegerIn(const Json& value, int64_t min, int64_t max) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    return (min <= 0 || v >= static_cast<uint64_t>(min)) && max >= 0 &&
           v <= static_cast<uint64_t>(max);
  }
  if (!value.is_number_integer()) return false;
  const int64_t v = value.get<int64_t>();
  return v >= min && v <= max;
}

std::string DescribeJson(const Json& value) {
  if (value.is_string()) {
    return absl::StrCat(
        "\"", absl::Utf8SafeCHexEscape(value.get_ref<const std::string&>()),
        "\"");
  }
  if (value.is_object()) {
    const auto it = value.find("class_name");
    if (it != value.end() && it->is_string()) {
      return absl::Utf8SafeCHexEscape(it->get_ref<const std::string&>());
    }
    return "{...}";
  }
  if (value.is_array()) {
    std::vector<std::string> items;
    for (const Json& item : value) items.push_back(DescribeJson(item));
    return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  }
  return value.dump();
}

KerasFields::KerasFields(const Json& object, std::string where,
                         std::string path)
    : object_(object), where_(std::move(where)), path_(std::move(path)) {}

KerasFields KerasFields::Nested(const Json& object,
                                absl::string_view key) const {
  return KerasFields(object, where_, absl::StrCat(path_, key, ".config."));
}

const Json* KerasFields::Find(absl::string_view key) const {
  const auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::Status KerasFields::Error(absl::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat(where_, problem));
}

absl::Status KerasFields::FieldError(absl::string_view key,
                                     absl::string_view problem) const {
  return Error(absl::StrCat(path_, key, ": ", problem));
}

absl::Status KerasFields::Unsupported(absl::string_view key, const Json& value,
                                      absl::string_view expected) const {
  return Error(absl::StrCat(path_, key, " ", DescribeJson(value),
                            " is not supported (", expected, ")"));
}

absl::Status KerasFields::TypeError(absl::string_view key,
                                    absl::string_view expected,
                                    const Json& value) const {
  return FieldError(key,
                    absl::StrCat("expected ", expected, ", ", JsonGot(value)));
}

absl::StatusOr<const Json*> KerasFields::Get(absl::string_view key,
                                             absl::string_view expected,
                                             bool required) const {
  const auto it = object_.find(key);
  if (it == object_.end()) {
    if (required) return FieldError(key, "missing");
    return nullptr;
  }
  if (it->is_null()) {
    if (required) return TypeError(key, expected, *it);
    return nullptr;
  }
  return &*it;
}

absl::StatusOr<int64_t> KerasFields::Int(
    absl::string_view key, int64_t min, int64_t max,
    std::optional<int64_t> fallback) const {
  PSTRAIN_ASSIGN_OR_RETURN(const Json* value,
                           Get(key, "an integer", !fallback.has_value()));
  if (value == nullptr) return *fallback;
  if (!value->is_number_integer()) return TypeError(key, "an integer", *value);
  if (!IsIntegerIn(*value, min, max)) {
    return FieldError(key, absl::StrCat(value->dump(), " is out of range [",
                                        min, ", ", max, "]"));
  }
  return value->get<int64_t>();
}

absl::StatusOr<double> KerasFields::Number(
    absl::string_view key, std::optional<double> fallback) const {
  PSTRAIN_ASSIGN_OR_RETURN(const Json* value,
                           Get(key, "a number", !fallback.has_value()));
  if (value == nullptr) return *fallback;
  if (!value->is_number()) return TypeError(key, "a number", *value);
  const double number = value->get<double>();
  if (!std::isfinite(number)) {
    return FieldError(key, absl::StrCat(value->dump(), " is not finite"));
  }
  return number;
}

absl::StatusOr<bool> KerasFields::Bool(absl::string_view key,
                                       bool fallback) const {
  const Json* value = Find(key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) return TypeError(key, "true or false", *value);
  return value->get<bool>();
}

absl::StatusOr<std::string> KerasFields::String(
    absl::string_view key, std::optional<std::string> fallback) const {
  PSTRAIN_ASSIGN_OR_RETURN(const Json* value,
                           Get(key, "a string", !fallback.has_value()));
  if (value == nullptr) return *std::move(fallback);
  if (!value->is_string()) return TypeError(key, "a string", *value);
  return value->get<std::string>();
}

absl::StatusOr<std::pair<int, int>> KerasFields::IntPair(
    absl::string_view key, std::optional<std::pair<int, int>> fallback) const {
  constexpr absl::string_view kExpected = "an integer or a list of 2 integers";
  PSTRAIN_ASSIGN_OR_RETURN(const Json* value,
                           Get(key, kExpected, !fallback.has_value()));
  if (value == nullptr) return *fallback;
  const bool is_pair = value->is_array() && value->size() == 2 &&
                       (*value)[0].is_number_integer() &&
                       (*value)[1].is_number_integer();
  if (!value->is_number_integer() && !is_pair) {
    return TypeError(key, kExpected, *value);
  }
  const Json& first = is_pair ? (*value)[0] : *value;
  const Json& second = is_pair ? (*value)[1] : *value;
  constexpr int kMax = std::numeric_limits<int>::max();
  if (!IsIntegerIn(first, 1, kMax) || !IsIntegerIn(second, 1, kMax)) {
    return FieldError(
        key, absl::StrCat(DescribeJson(*value),
                          " is out of range (each value in [1, ", kMax, "])"));
  }
  return std::make_pair(first.get<int>(), second.get<int>());
}

absl::StatusOr<KerasObject> KerasFields::Object(absl::string_view key) const {
  const Json* value = Find(key);
  if (value == nullptr) return KerasObject();
  if (value->is_string()) {
    return KerasObject{value->get<std::string>(), &EmptyObject()};
  }
  if (!value->is_object()) {
    return TypeError(
        key, "a Keras object {\"class_name\": ..., \"config\": {...}}", *value);
  }
  const KerasFields fields(*value, where_, absl::StrCat(path_, key, "."));
  PSTRAIN_ASSIGN_OR_RETURN(std::string class_name,
                           fields.String("class_name", std::nullopt));
  PSTRAIN_RETURN_IF_ERROR(fields.ExpectKerasClass(class_name));
  const Json* config = fields.Find("config");
  if (config == nullptr) config = &EmptyObject();
  if (!config->is_object()) {
    return fields.TypeError("config", "an object", *config);
  }
  return KerasObject{std::move(class_name), config};
}

absl::Status KerasFields::ExpectKerasClass(absl::string_view class_name) const {
  PSTRAIN_ASSIGN_OR_RETURN(std::string registered,
                           String("registered_name", std::string(class_name)));
  PSTRAIN_ASSIGN_OR_RETURN(std::string module, String("module", "keras"));
  const bool keras_module =
      module == "keras" || absl::StartsWith(module, "keras.");
  if (registered == class_name && keras_module) return absl::OkStatus();
  // path_ is "" for a layer, "kernel_initializer." for a nested object.
  const absl::string_view path =
      absl::StripSuffix(absl::string_view(path_), ".");
  return Error(absl::StrCat(path, path.empty() ? "" : ": ", "custom class \"",
                            absl::Utf8SafeCHexEscape(registered),
                            "\" (module \"", absl::Utf8SafeCHexEscape(module),
                            "\") is not supported"));
}

absl::Status KerasFields::ExpectNull(absl::string_view key) const {
  const Json* value = Find(key);
  if (value == nullptr) return absl::OkStatus();
  return Unsupported(key, *value, "expected null");
}

}  // namespace worker
}  // namespace pstrain

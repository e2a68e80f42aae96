// Small helpers for reading JSON with nlohmann::json without exceptions, as
// pstrain's parsers do: parse with ParseJson, test every value's type (is_*)
// before reading it, and name the type found when it is the wrong one.
//
//   absl::StatusOr<nlohmann::json> root = ParseJson(text);
//   if (!root.ok()) return Error(root.status().message());
//   if (!root->is_object()) return Error("expected an object, " +
//   JsonGot(*root));
#ifndef PSTRAIN_COMMON_JSON_UTIL_H_
#define PSTRAIN_COMMON_JSON_UTIL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace pstrain {

// The most levels of arrays and objects a JSON text may nest. Error messages
// and parsers walk values recursively (nlohmann's dump() too), so a deeper
// text could overflow the stack (dump() did at 100,000 levels); Keras models,
// cluster specs and layout maps nest fewer than 20.
inline constexpr int kMaxJsonDepth = 256;

// The value of `text`, parsed without exceptions; INVALID_ARGUMENT saying
// where and why when it is not JSON ("parse error at line 2, column 5:
// syntax error while parsing object key - ..."), or that it nests more than
// kMaxJsonDepth levels deep.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text);
// The same, keeping each object's keys in the text's order.
absl::StatusOr<nlohmann::ordered_json> ParseOrderedJson(absl::string_view text);

// "got a string", "got an object", "got null", ... for messages about a value
// of the wrong type.
std::string JsonGot(const nlohmann::json& value);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_JSON_UTIL_H_

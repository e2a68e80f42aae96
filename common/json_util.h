// Small helpers for reading JSON with nlohmann::json without exceptions, as
// pstrain's parsers do: parse with allow_exceptions=false, test every value's
// type (is_*) before reading it, and report a failed parse with its position.
//
//   const nlohmann::json root = nlohmann::json::parse(
//       text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
//   if (root.is_discarded()) return Error(JsonParseError(text));
//   if (!root.is_object()) return Error("expected an object, " +
//   JsonGot(root));
#ifndef PSTRAIN_COMMON_JSON_UTIL_H_
#define PSTRAIN_COMMON_JSON_UTIL_H_

#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace pstrain {

// Why `text` is not valid JSON, with its position, e.g. "parse error at line
// 2, column 5: syntax error while parsing object key - ...". REQUIRES: `text`
// failed to parse (the DOM parser without exceptions reports failure but not
// where, so this parses it again to find out).
std::string JsonParseError(absl::string_view text);

// "got a string", "got an object", "got null", ... for messages about a value
// of the wrong type.
std::string JsonGot(const nlohmann::json& value);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_JSON_UTIL_H_

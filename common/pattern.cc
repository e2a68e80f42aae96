#include "common/pattern.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<std::shared_ptr<const re2::RE2>> CompilePattern(
    absl::string_view pattern) {
  re2::RE2::Options options;
  options.set_log_errors(false);  // returned instead
  auto re = std::make_shared<const re2::RE2>(
      re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid regular expression: ", re->error()));
  }
  return re;
}

}  // namespace pstrain

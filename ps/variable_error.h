// The error a shard gives for a request that does not fit one of its
// variables: INVALID_ARGUMENT "variable '<name>': <problem>", the form every
// refusal about a variable takes, so that users can find the variable.
#ifndef PSTRAIN_PS_VARIABLE_ERROR_H_
#define PSTRAIN_PS_VARIABLE_ERROR_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace ps {

inline absl::Status VariableError(absl::string_view name,
                                  absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("variable '", name, "': ", problem));
}

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_VARIABLE_ERROR_H_

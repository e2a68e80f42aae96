// Saying where an error happened without losing what it is: the status with
// "<context>: " before its message, its code and its payloads (what kind of
// error it is, e.g. ps/staleness.h) kept.
//
//   return WithContext(absl::StrCat("ps ", i), status);
//   // "ps 1: variable 'w': ..." with status's code and payloads
#ifndef PSTRAIN_COMMON_STATUS_CONTEXT_H_
#define PSTRAIN_COMMON_STATUS_CONTEXT_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// OK stays OK.
absl::Status WithContext(absl::string_view context, const absl::Status& status);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_STATUS_CONTEXT_H_

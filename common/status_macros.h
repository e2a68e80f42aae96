// Early-return helpers for absl::Status and absl::StatusOr<T>.
//
// Debian's Abseil (20220623) has no RETURN_IF_ERROR / ASSIGN_OR_RETURN, so
// pstrain defines its own, once, here:
//
//   absl::Status Load(const std::string& path) {
//     PSTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//     PSTRAIN_RETURN_IF_ERROR(Parse(text));
//     return absl::OkStatus();
//   }
#ifndef PSTRAIN_COMMON_STATUS_MACROS_H_
#define PSTRAIN_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr` (an absl::Status) once; returns it if it is not OK.
#define PSTRAIN_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status pstrain_status_ = (expr);           \
    if (!pstrain_status_.ok()) return pstrain_status_; \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>) once; returns its status if it is
// not OK, else move-assigns its value to `lhs`, which may be a declaration.
#define PSTRAIN_ASSIGN_OR_RETURN(lhs, rexpr) \
  PSTRAIN_ASSIGN_OR_RETURN_IMPL_(            \
      PSTRAIN_STATUS_CONCAT_(pstrain_statusor_, __LINE__), lhs, rexpr)

#define PSTRAIN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();   \
  lhs = std::move(statusor).value()

#define PSTRAIN_STATUS_CONCAT_(a, b) PSTRAIN_STATUS_CONCAT_IMPL_(a, b)
#define PSTRAIN_STATUS_CONCAT_IMPL_(a, b) a##b

#endif  // PSTRAIN_COMMON_STATUS_MACROS_H_

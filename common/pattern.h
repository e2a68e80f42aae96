// A regular expression from a user (a placement rule, a layout map key),
// compiled by RE2, whose syntax is Python's re without backreferences and
// lookaround (what Keras's LayoutMap keys are written in). RE2 matches in
// time linear in the text and without recursion, so no pattern and no
// variable name can stall or crash the process; std::regex, used before,
// overflowed the stack matching `.*kernel` against a name of 50,000
// characters, and compiling a pattern nested 100,000 parentheses deep.
// RE2 compiles such a pattern, and refuses one whose program would exceed
// its default 8 MB.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const re2::RE2> re,
//                            CompilePattern("d1/.*"));
//   bool whole = re2::RE2::FullMatch(name, *re);
//   bool found = re2::RE2::PartialMatch(name, *re);
#ifndef PSTRAIN_COMMON_PATTERN_H_
#define PSTRAIN_COMMON_PATTERN_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "re2/re2.h"

namespace pstrain {

// INVALID_ARGUMENT "invalid regular expression: <RE2's reason>" for a
// pattern RE2 refuses: bad syntax (a backreference or lookaround included),
// a repetition count over 1000, a program over 8 MB.
absl::StatusOr<std::shared_ptr<const re2::RE2>> CompilePattern(
    absl::string_view pattern);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_PATTERN_H_

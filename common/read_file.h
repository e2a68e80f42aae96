// Reading a whole file a user names (TF_CONFIG's @path, --model,
// --layout_map, token and certificate files) with a bound: a mistaken path
// to a data set, /dev/zero or /dev/urandom is refused once it passes
// `max_bytes`, instead of being read into memory until the host runs out.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::string text,
//                            ReadFileAtMost(path, kMaxConfigFileBytes));
#ifndef PSTRAIN_COMMON_READ_FILE_H_
#define PSTRAIN_COMMON_READ_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain {

// The bound for files of settings (TF_CONFIG, a layout map, keys): far
// above any real one.
inline constexpr size_t kMaxConfigFileBytes = 16 << 20;

// The content of `path`. Errors: the OS's reason, with its code, as
// "cannot read <path>: No such file or directory"; FAILED_PRECONDITION
// "<path> is larger than <max_bytes> bytes" (reading stops there).
absl::StatusOr<std::string> ReadFileAtMost(const std::string& path,
                                           size_t max_bytes);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_READ_FILE_H_

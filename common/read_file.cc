#include "common/read_file.h"

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<std::string> ReadFileAtMost(const std::string& path,
                                           size_t max_bytes) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path));
  }
  std::string content;
  char buffer[1 << 16];
  size_t n;
  while (content.size() <= max_bytes &&
         (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    content.append(buffer, n);
  }
  const int error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (error != 0) {
    return absl::ErrnoToStatus(error, absl::StrCat("cannot read ", path));
  }
  if (content.size() > max_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is larger than ", max_bytes, " bytes"));
  }
  return content;
}

}  // namespace pstrain

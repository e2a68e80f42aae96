#include "common/file_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<FileLock>> FileLock::Acquire(
    const std::string& path, const std::string& holder) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", path));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == ENOLCK || error == EOPNOTSUPP || error == ENOSYS) {
      close(fd);
      return absl::UnimplementedError(
          absl::StrCat("lock ", path, ": the file system has no locks (",
                       std::strerror(error), ")"));
    }
    if (error != EWOULDBLOCK) {
      close(fd);
      return ErrnoStatus(error, absl::StrCat("lock ", path));
    }
    char buffer[256];
    const ssize_t n = pread(fd, buffer, sizeof(buffer), 0);
    close(fd);
    const absl::string_view other =
        n > 0 ? absl::StripTrailingAsciiWhitespace(absl::string_view(buffer, n))
              : "another process";
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is held by ", other));
  }
  const std::string line = holder + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, line.data(), line.size(), 0) !=
                                   static_cast<ssize_t>(line.size())) {
    const int error = errno;
    close(fd);
    return ErrnoStatus(error, absl::StrCat("write ", path));
  }
  return std::unique_ptr<FileLock>(new FileLock(fd));
}

FileLock::~FileLock() { close(fd_); }

}  // namespace pstrain

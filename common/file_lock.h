// An exclusive lock on a file, held while the FileLock lives, or until the
// process dies (an advisory flock(2): the kernel drops it with the process,
// so a task killed by a signal never leaves a stale lock behind). The
// holder writes its description into the file, for the error that the next
// one to try gets.
//
//   PSTRAIN_ASSIGN_OR_RETURN(
//       std::unique_ptr<FileLock> lock,
//       FileLock::Acquire(model_dir + "/chief.lock", "chief pid 1234"));
#ifndef PSTRAIN_COMMON_FILE_LOCK_H_
#define PSTRAIN_COMMON_FILE_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain {

class FileLock {
 public:
  // Takes the lock on `path` (created if absent) without waiting, and
  // writes `holder` into it. FAILED_PRECONDITION "<path> is held by
  // <the holder's description>" when another holds it (another process, or
  // another FileLock of this one); UNIMPLEMENTED on a file system without
  // locks (an NFS mount without its lock service); other errors of the file
  // name the path and the OS reason.
  static absl::StatusOr<std::unique_ptr<FileLock>> Acquire(
      const std::string& path, const std::string& holder);
  // Releases the lock (the file stays).
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_FILE_LOCK_H_

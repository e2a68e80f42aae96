#include "common/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::Status ErrnoStatus(int error, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    case EEXIST:
      return absl::AlreadyExistsError(message);
    case ENOTDIR:
    case EISDIR:
    case EROFS:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status MakeDirectories(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, absl::StrCat("mkdir ", prefix));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckWritableDirectory(const std::string& dir) {
  absl::Status made = MakeDirectories(dir);
  if (!made.ok()) return made;
  const std::string probe = absl::StrCat(dir, "/.pstrain-probe-", getpid());
  const int fd =
      open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot create a file in ", dir));
  }
  close(fd);
  unlink(probe.c_str());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AtomicFile>> AtomicFile::Create(
    std::string path) {
  std::string temp = absl::StrCat(path, ".tmp-", getpid());
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", temp));
  return std::unique_ptr<AtomicFile>(
      new AtomicFile(std::move(path), std::move(temp), fd));
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view content) {
  absl::StatusOr<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<int64_t> written =
      (*file)->Append(content.data(), content.size());
  if (!written.ok()) return written.status();
  return (*file)->Commit();
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) close(fd_);
  if (!committed_) unlink(temp_.c_str());
}

absl::StatusOr<int64_t> AtomicFile::Append(const void* data, size_t size) {
  const int64_t offset = size_;
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("write ", temp_));
    }
    p += n;
    size -= n;
    size_ += n;
  }
  return offset;
}

absl::Status AtomicFile::Commit() {
  if (fsync(fd_) != 0) return ErrnoStatus(errno, absl::StrCat("fsync ", temp_));
  if (close(fd_) != 0) {
    fd_ = -1;
    return ErrnoStatus(errno, absl::StrCat("close ", temp_));
  }
  fd_ = -1;
  if (rename(temp_.c_str(), path_.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("rename ", temp_, " to ", path_));
  }
  committed_ = true;
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash + 1);
  const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", dir));
  const int synced = fsync(dir_fd);
  close(dir_fd);
  if (synced != 0) return ErrnoStatus(errno, absl::StrCat("fsync ", dir));
  return absl::OkStatus();
}

}  // namespace pstrain

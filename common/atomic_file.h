// Writing a file so that it appears whole or not at all: bytes go to
// "<path>.tmp-<pid>", which Commit() fsyncs and renames to `path` (then
// fsyncs the directory). A writer destroyed without Commit() removes its
// temporary file, so a crash or an error never leaves a partial `path`.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file,
//                            AtomicFile::Create(dir + "/ps-0.data"));
//   PSTRAIN_ASSIGN_OR_RETURN(int64_t offset, file->Append(data, size));
//   PSTRAIN_RETURN_IF_ERROR(file->Commit());
#ifndef PSTRAIN_COMMON_ATOMIC_FILE_H_
#define PSTRAIN_COMMON_ATOMIC_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

class AtomicFile {
 public:
  // Opens the temporary file; errors name the path and the OS reason.
  static absl::StatusOr<std::unique_ptr<AtomicFile>> Create(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends `size` bytes; returns the offset they start at.
  absl::StatusOr<int64_t> Append(const void* data, size_t size);

  // fsync, rename into place, fsync the directory.
  absl::Status Commit();

 private:
  AtomicFile(std::string path, std::string temp, int fd)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}

  const std::string path_;
  const std::string temp_;
  int fd_;
  int64_t size_ = 0;
  bool committed_ = false;
};

// Writes `content` as the whole of `path`, atomically (an AtomicFile).
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view content);

// Creates `path` and its missing parents (mkdir -p).
absl::Status MakeDirectories(const std::string& path);

// Creates `dir` (MakeDirectories) and checks that a file can be created in
// it, by creating and removing an empty one: what a task that will write
// checkpoints checks when it starts, rather than at its first checkpoint.
// Errors name the path and the OS reason ("Not a directory", "Read-only
// file system", "Permission denied").
absl::Status CheckWritableDirectory(const std::string& dir);

// The absl status for errno `error` in `what` ("open /x/y"), e.g.
// NOT_FOUND "open /x/y: No such file or directory".
absl::Status ErrnoStatus(int error, absl::string_view what);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_ATOMIC_FILE_H_

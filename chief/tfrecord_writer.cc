#include "chief/tfrecord_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/crc32c.h"

namespace pstrain {
namespace chief {
namespace {

void AppendLittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) {
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

}  // namespace

uint32_t MaskedCrc32c(const void* data, size_t size) {
  const uint32_t crc = Crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string FrameTfRecord(absl::string_view record) {
  std::string framed;
  framed.reserve(record.size() + 16);
  AppendLittleEndian(record.size(), 8, &framed);
  AppendLittleEndian(MaskedCrc32c(framed.data(), 8), 4, &framed);
  framed.append(record.data(), record.size());
  AppendLittleEndian(MaskedCrc32c(record.data(), record.size()), 4, &framed);
  return framed;
}

absl::StatusOr<std::unique_ptr<TfRecordWriter>> TfRecordWriter::Create(
    const std::string& path) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("create ", path));
  return std::unique_ptr<TfRecordWriter>(new TfRecordWriter(path, fd));
}

TfRecordWriter::~TfRecordWriter() { close(fd_); }

absl::Status TfRecordWriter::Write(absl::string_view record) {
  const std::string framed = FrameTfRecord(record);
  size_t done = 0;
  while (done < framed.size()) {
    const ssize_t n = write(fd_, framed.data() + done, framed.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, absl::StrCat("write ", path_));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace chief
}  // namespace pstrain

// Appends records to a file in TensorFlow's TFRecord framing, the container
// of TensorBoard's event files (chief/event_writer.h). Each record is
//
//   uint64 length, little-endian
//   uint32 masked CRC32C of those 8 bytes, little-endian
//   the `length` bytes of the record
//   uint32 masked CRC32C of the record, little-endian
//
// where the mask is ((crc >> 15) | (crc << 17)) + 0xa282ead8 (TensorFlow's,
// so that a CRC of data holding CRCs stays well distributed).
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TfRecordWriter> file,
//                            TfRecordWriter::Create(dir + "/events.out..."));
//   PSTRAIN_RETURN_IF_ERROR(file->Write(event.SerializeAsString()));
//
// Each Write hands the whole framed record to the OS in one write(2), so a
// reader following the file (TensorBoard polls it) sees whole records as
// they come; nothing is buffered in the process. Not thread-safe: one
// caller at a time.
#ifndef PSTRAIN_CHIEF_TFRECORD_WRITER_H_
#define PSTRAIN_CHIEF_TFRECORD_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace chief {

// TFRecord's masked CRC32C of `size` bytes at `data`.
uint32_t MaskedCrc32c(const void* data, size_t size);

// `record` framed as above.
std::string FrameTfRecord(absl::string_view record);

class TfRecordWriter {
 public:
  // Creates `path`, which must not exist yet (a file is never appended to
  // by two writers); errors name the path and the OS reason.
  static absl::StatusOr<std::unique_ptr<TfRecordWriter>> Create(
      const std::string& path);
  ~TfRecordWriter();
  TfRecordWriter(const TfRecordWriter&) = delete;
  TfRecordWriter& operator=(const TfRecordWriter&) = delete;

  // Appends `record`, framed.
  absl::Status Write(absl::string_view record);

  const std::string& path() const { return path_; }

 private:
  TfRecordWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::string path_;
  const int fd_;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_TFRECORD_WRITER_H_

// A data file's bytes, gunzipped when the file is gzip-compressed.
//
// The dataset readers (IDX, CSV) read a whole file with ReadFileBytes and
// parse it from memory, so "train-images-idx3-ubyte" and
// "train-images-idx3-ubyte.gz" read alike. A file is gzip when it starts with
// the gzip magic bytes 1f 8b, whatever its name; concatenated gzip members
// (as `cat a.gz b.gz` makes) are read as one stream.
//
//   PSTRAIN_ASSIGN_OR_RETURN(FileBytes file, ReadFileBytes(path));
//   Parse(file.bytes);
//
// Errors start with the path: the errno's code (NOT_FOUND,
// PERMISSION_DENIED, ...) when the file cannot be opened or read, DATA_LOSS
// for a corrupt or truncated gzip stream, naming the compressed offset.
#ifndef PSTRAIN_DATA_FILE_BYTES_H_
#define PSTRAIN_DATA_FILE_BYTES_H_

#include <string>

#include "absl/status/statusor.h"

namespace pstrain {
namespace data {

struct FileBytes {
  std::string bytes;     // Decompressed when `gzipped`.
  bool gzipped = false;  // So parsers can say which offsets they report.
};

absl::StatusOr<FileBytes> ReadFileBytes(const std::string& path);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_FILE_BYTES_H_

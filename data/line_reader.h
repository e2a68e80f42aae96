// The lines of a text file, plain or gzip-compressed, read in pieces: a file
// of any size is streamed through a buffer of about 1 MiB, never loaded whole
// (a day of Criteo's Terabyte set is 45 GB).
//
// A file is gzip when it starts with the gzip magic bytes 1f 8b, whatever its
// name; concatenated gzip members (`cat a.gz b.gz`) read as one stream, as in
// data/file_bytes.h (unlike there, bytes after the last member that do
// not start another are ignored, as zlib's gzread does). Lines end at '\n',
// which is not part of the line (a '\r' before it is left to the caller). The
// last line need not end with '\n'; `terminated()` tells the caller which kind
// it got. A file ending in '\n' has no empty line after it.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LineReader> lines,
//                            LineReader::Open(path));
//   absl::string_view line;
//   for (;;) {
//     PSTRAIN_ASSIGN_OR_RETURN(bool more, lines->Next(&line));
//     if (!more) break;
//     Parse(line, lines->line_number());
//   }
//
// Errors name the path: the errno's code when the file cannot be opened or
// read, DATA_LOSS for a corrupt or truncated gzip stream (naming the last
// whole line read), INVALID_ARGUMENT for a line longer than
// `max_line_bytes`. Not thread-safe: one reader per thread.
#ifndef PSTRAIN_DATA_LINE_READER_H_
#define PSTRAIN_DATA_LINE_READER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct gzFile_s;  // zlib's file handle.

namespace pstrain {
namespace data {

class LineReader {
 public:
  // Lines longer than this are refused (they are not Criteo lines, and a
  // file without newlines must not be buffered whole).
  static constexpr int64_t kDefaultMaxLineBytes = 1 << 20;

  static absl::StatusOr<std::unique_ptr<LineReader>> Open(
      const std::string& path, int64_t max_line_bytes = kDefaultMaxLineBytes);

  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Sets `*line` to the next line (valid until the next call) and returns
  // true, or returns false at the end of the file.
  absl::StatusOr<bool> Next(absl::string_view* line);

  // The 1-based number of the line Next returned last (0 before the first).
  int64_t line_number() const { return line_number_; }
  // Whether that line ended with '\n' (false only for a last line without).
  bool terminated() const { return terminated_; }
  bool gzipped() const { return gzipped_; }
  const std::string& path() const { return path_; }

 private:
  LineReader(std::string path, gzFile_s* file, int64_t max_line_bytes);
  // Reads more bytes after end_; false at the end of the file.
  absl::StatusOr<bool> Fill();

  const std::string path_;
  gzFile_s* const file_;  // Reads plain files as they are.
  const int64_t max_line_bytes_;
  bool gzipped_ = false;
  std::string buffer_;
  size_t begin_ = 0;  // Unreturned bytes are buffer_[begin_, end_).
  size_t end_ = 0;
  size_t scanned_ = 0;  // buffer_[begin_, scanned_) holds no '\n'.
  bool eof_ = false;
  int64_t line_number_ = 0;
  bool terminated_ = true;
};

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_LINE_READER_H_

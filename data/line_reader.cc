#include "data/line_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace data {
namespace {

// Bytes asked of zlib per read, and the buffer's initial size.
constexpr size_t kChunk = 1 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<LineReader>> LineReader::Open(
    const std::string& path, int64_t max_line_bytes) {
  if (max_line_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_line_bytes is ", max_line_bytes, "; must be >= 1"));
  }
  errno = 0;
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::ErrnoToStatus(errno != 0 ? errno : ENOMEM,
                               absl::StrCat("cannot open '", path, "'"));
  }
  gzbuffer(file, 256 << 10);
  std::unique_ptr<LineReader> reader(
      new LineReader(path, file, max_line_bytes));
  // gzdirect looks at the first bytes: 0 when they are the gzip magic.
  reader->gzipped_ = gzdirect(file) == 0;
  return reader;
}

LineReader::LineReader(std::string path, gzFile_s* file, int64_t max_line_bytes)
    : path_(std::move(path)),
      file_(file),
      max_line_bytes_(max_line_bytes),
      buffer_(kChunk, '\0') {}

LineReader::~LineReader() { gzclose(file_); }

absl::StatusOr<bool> LineReader::Fill() {
  // Move the unreturned bytes to the front, growing the buffer when they
  // fill most of it (a long line).
  if (begin_ > 0) {
    std::memmove(&buffer_[0], &buffer_[begin_], end_ - begin_);
    end_ -= begin_;
    scanned_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - end_ < kChunk / 2) buffer_.resize(buffer_.size() * 2);
  const unsigned want =
      static_cast<unsigned>(std::min(buffer_.size() - end_, kChunk));
  errno = 0;
  const int n = gzread(file_, &buffer_[end_], want);
  int code = Z_OK;
  const char* message = gzerror(file_, &code);
  if (n < 0 || code != Z_OK) {
    if (code == Z_ERRNO) {
      return absl::ErrnoToStatus(
          errno,
          absl::StrCat("cannot read '", path_, "' after line ", line_number_));
    }
    return absl::DataLossError(absl::StrCat(
        "'", path_, "': corrupt or truncated gzip stream after line ",
        line_number_, ": ", message != nullptr ? message : "gzread failed"));
  }
  end_ += n;
  return n > 0;
}

absl::StatusOr<bool> LineReader::Next(absl::string_view* line) {
  for (;;) {
    const void* newline =
        std::memchr(buffer_.data() + scanned_, '\n', end_ - scanned_);
    const size_t at = newline != nullptr
                          ? static_cast<const char*>(newline) - buffer_.data()
                          : end_;
    if (static_cast<int64_t>(at - begin_) > max_line_bytes_) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", path_, "': line ", line_number_ + 1,
                       " is longer than ", max_line_bytes_, " bytes"));
    }
    if (newline != nullptr) {
      *line = absl::string_view(buffer_.data() + begin_, at - begin_);
      begin_ = scanned_ = at + 1;
      ++line_number_;
      terminated_ = true;
      return true;
    }
    scanned_ = end_;
    if (eof_) {
      if (begin_ == end_) return false;
      *line = absl::string_view(buffer_.data() + begin_, end_ - begin_);
      begin_ = scanned_ = end_;
      ++line_number_;
      terminated_ = false;
      return true;
    }
    absl::StatusOr<bool> more = Fill();
    if (!more.ok()) return more.status();
    if (!*more) eof_ = true;
  }
}

}  // namespace data
}  // namespace pstrain

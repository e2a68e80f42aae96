#include "data/file_bytes.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace data {
namespace {

// zlib counts in 32-bit uInt; larger inputs are fed in pieces.
constexpr size_t kMaxZlibChunk = size_t{1} << 30;
// Output is inflated into a chunk of this size, then appended.
constexpr uInt kOutChunk = 256 << 10;

bool HasGzipMagic(absl::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

absl::StatusOr<std::string> ReadRaw(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open '", path, "'"));
  }
  std::string bytes;
  struct stat info;
  if (fstat(fileno(file), &info) == 0 && info.st_size > 0) {
    bytes.reserve(info.st_size);
  }
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    bytes.append(buffer, n);
  }
  const int error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (error != 0) {
    return absl::ErrnoToStatus(error, absl::StrCat("cannot read '", path, "'"));
  }
  return bytes;
}

// The gzip trailer's ISIZE (the last member's size mod 2^32) when deflate
// could produce that much (at most 1032 bytes per input byte): what to
// reserve for the output. A wrong guess costs only a reallocation, and
// reserved pages that are never written are never touched.
size_t SizeHint(absl::string_view in) {
  if (in.size() < 18) return 0;
  size_t hint = 0;
  for (int i = 1; i <= 4; ++i) {
    hint = (hint << 8) | static_cast<unsigned char>(in[in.size() - i]);
  }
  return hint <= 1032 * in.size() ? hint : 0;
}

absl::StatusOr<std::string> Gunzip(const std::string& path,
                                   absl::string_view in) {
  z_stream zs = {};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return absl::InternalError(
        absl::StrCat("'", path, "': inflateInit2 failed"));
  }
  std::string out;
  out.reserve(SizeHint(in));
  const std::unique_ptr<char[]> chunk(new char[kOutChunk]);
  size_t in_pos = 0;  // Bytes of `in` handed to zlib.
  absl::Status status;
  for (;;) {
    if (zs.avail_in == 0 && in_pos < in.size()) {
      const size_t piece = std::min(in.size() - in_pos, kMaxZlibChunk);
      zs.next_in =
          reinterpret_cast<Bytef*>(const_cast<char*>(in.data())) + in_pos;
      zs.avail_in = static_cast<uInt>(piece);
      in_pos += piece;
    }
    zs.next_out = reinterpret_cast<Bytef*>(chunk.get());
    zs.avail_out = kOutChunk;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    out.append(chunk.get(), kOutChunk - zs.avail_out);
    const size_t consumed = in_pos - zs.avail_in;
    if (rc == Z_STREAM_END) {
      if (consumed == in.size()) break;
      if (HasGzipMagic(in.substr(consumed)) && inflateReset(&zs) == Z_OK) {
        continue;  // The next member of a concatenated file.
      }
      status = absl::DataLossError(absl::StrCat(
          "'", path, "': ", in.size() - consumed,
          " unexpected bytes after the gzip stream at compressed offset ",
          consumed));
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      status = absl::DataLossError(absl::StrCat(
          "'", path, "': corrupt gzip stream at compressed offset ", consumed,
          ": ", zs.msg != nullptr ? zs.msg : "inflate failed"));
      break;
    }
    if (zs.avail_in == 0 && in_pos == in.size() && zs.avail_out != 0) {
      status = absl::DataLossError(absl::StrCat(
          "'", path, "': gzip stream ends early, after all ", in.size(),
          " compressed bytes (", out.size(), " bytes decompressed)"));
      break;
    }
  }
  inflateEnd(&zs);
  if (!status.ok()) return status;
  return out;
}

}  // namespace

absl::StatusOr<FileBytes> ReadFileBytes(const std::string& path) {
  absl::StatusOr<std::string> raw = ReadRaw(path);
  if (!raw.ok()) return raw.status();
  FileBytes file;
  file.gzipped = HasGzipMagic(*raw);
  if (!file.gzipped) {
    file.bytes = *std::move(raw);
    return file;
  }
  absl::StatusOr<std::string> bytes = Gunzip(path, *raw);
  if (!bytes.ok()) return bytes.status();
  file.bytes = *std::move(bytes);
  return file;
}

}  // namespace data
}  // namespace pstrain

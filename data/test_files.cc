#include "data/test_files.h"

#include <zlib.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {

std::string TempPath(absl::string_view name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

void WriteFile(const std::string& path, absl::string_view bytes) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    ADD_FAILURE() << "cannot create " << path;
    return;
  }
  if (std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) {
    ADD_FAILURE() << "cannot write " << path;
  }
  std::fclose(file);
}

std::string Gzip(absl::string_view bytes) {
  z_stream zs = {};
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    ADD_FAILURE() << "deflateInit2 failed";
    return "";
  }
  std::string out(deflateBound(&zs, bytes.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = reinterpret_cast<Bytef*>(&out[0]);
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) ADD_FAILURE() << "deflate failed";
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string BigEndian32(uint32_t value) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(value >> (24 - 8 * i));
  return out;
}

uint8_t PixelValue(int64_t image, int64_t pixel) {
  return static_cast<uint8_t>((image * 31 + pixel * 7 + 3) % 256);
}

std::string IdxImages(uint32_t n, uint32_t rows, uint32_t cols) {
  std::string out = absl::StrCat(BigEndian32(0x00000803), BigEndian32(n),
                                 BigEndian32(rows), BigEndian32(cols));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < int64_t{rows} * cols; ++j) {
      out.push_back(static_cast<char>(PixelValue(i, j)));
    }
  }
  return out;
}

std::string IdxLabels(const std::vector<uint8_t>& labels) {
  std::string out =
      absl::StrCat(BigEndian32(0x00000801),
                   BigEndian32(static_cast<uint32_t>(labels.size())));
  for (uint8_t label : labels) out.push_back(static_cast<char>(label));
  return out;
}

}  // namespace data
}  // namespace pstrain

// Test helpers: write input files for the data readers under $TEST_TMPDIR.
//
//   const std::string path = TempPath("images.gz");
//   WriteFile(path, Gzip(IdxImages(3, 2, 2)));
//
// Failures to write are reported with ADD_FAILURE.
#ifndef PSTRAIN_DATA_TEST_FILES_H_
#define PSTRAIN_DATA_TEST_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace pstrain {
namespace data {

// `name` under $TEST_TMPDIR (or /tmp outside Bazel).
std::string TempPath(absl::string_view name);

void WriteFile(const std::string& path, absl::string_view bytes);

// `bytes` as one gzip member.
std::string Gzip(absl::string_view bytes);

// `value` as 4 big-endian bytes, as IDX headers store integers.
std::string BigEndian32(uint32_t value);

// An IDX images file (magic 0x00000803) of `n` images of rows x cols whose
// pixel j of image i is PixelValue(i, j).
std::string IdxImages(uint32_t n, uint32_t rows, uint32_t cols);
uint8_t PixelValue(int64_t image, int64_t pixel);

// An IDX labels file (magic 0x00000801).
std::string IdxLabels(const std::vector<uint8_t>& labels);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_TEST_FILES_H_

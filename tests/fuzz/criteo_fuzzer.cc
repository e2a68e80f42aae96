// Fuzzes the Criteo reader (data/criteo_reader.h) and, through it, the line
// parser (data/criteo_line.h) and the streaming line reader, plain or gzip
// (data/line_reader.h). Input: a byte of options, a byte of batch size,
// then the file's bytes. Every worker of the chosen count reads the file,
// and beyond not crashing the target checks the headers' promises:
//   - errors are INVALID_ARGUMENT or DATA_LOSS naming the file, and a
//     reader that failed returns the same error again;
//   - a batch holds 1 to B rows, labels 0 or 1, finite dense values >= 0,
//     and rows of this worker's blocks ((g / B) mod W == w), in order;
//   - every line at or after start_line is read or skipped as malformed by
//     exactly one worker;
//   - in a plain file, a row is what ParseCriteoLine makes of its line, and
//     CountCriteoLines counts the lines there are;
//   - a reader opened at a batch's next_line continues with the next batch.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "data/criteo_line.h"
#include "data/criteo_reader.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain {
namespace data {
namespace {

bool ErrorNamesFile(const absl::Status& status, const std::string& path) {
  return (status.code() == absl::StatusCode::kInvalidArgument ||
          status.code() == absl::StatusCode::kDataLoss) &&
         absl::StrContains(status.message(), path);
}

// Row `row` of `batch` equals what ParseCriteoLine makes of `line`.
void CheckRowIsLine(const CriteoBatch& batch, int64_t row,
                    absl::string_view line) {
  float label = 0;
  float dense[kCriteoDense];
  uint64_t sparse[kCriteoSparse];
  const absl::Status parsed = ParseCriteoLine(line, &label, dense, sparse);
  PSTRAIN_FUZZ_EXPECT(parsed.ok(), "line ", batch.lines[row],
                      " was read but does not parse: ", parsed.message());
  PSTRAIN_FUZZ_EXPECT(label == batch.labels[row], batch.lines[row]);
  PSTRAIN_FUZZ_EXPECT(
      std::memcmp(dense, &batch.dense[row * kCriteoDense], sizeof(dense)) == 0,
      batch.lines[row]);
  PSTRAIN_FUZZ_EXPECT(std::memcmp(sparse, &batch.sparse[row * kCriteoSparse],
                                  sizeof(sparse)) == 0,
                      batch.lines[row]);
}

// What one worker's pass read.
struct Pass {
  std::vector<CriteoBatch> batches;
  int64_t bad_lines = 0;
  bool failed = false;
};

Pass ReadPass(const std::string& path, const CriteoReaderOptions& options,
              const std::vector<absl::string_view>& plain_lines) {
  Pass pass;
  absl::StatusOr<std::unique_ptr<CriteoReader>> reader =
      CriteoReader::Open({path}, options);
  PSTRAIN_FUZZ_EXPECT(reader.ok(), reader.status().ToString());
  int64_t last_line = -1;
  for (;;) {
    CriteoBatch batch;
    absl::StatusOr<bool> more = (*reader)->Next(&batch);
    if (!more.ok()) {
      PSTRAIN_FUZZ_EXPECT(ErrorNamesFile(more.status(), path),
                          more.status().ToString());
      const absl::StatusOr<bool> again = (*reader)->Next(&batch);
      PSTRAIN_FUZZ_EXPECT(!again.ok() && again.status() == more.status(),
                          again.status().ToString());
      pass.failed = true;
      break;
    }
    if (!*more) {
      PSTRAIN_FUZZ_EXPECT(batch.size() == 0, batch.size());
      break;
    }
    const int64_t n = batch.size();
    PSTRAIN_FUZZ_EXPECT(n >= 1 && n <= options.batch_size, n);
    PSTRAIN_FUZZ_EXPECT(
        static_cast<int64_t>(batch.lines.size()) == n &&
            static_cast<int64_t>(batch.dense.size()) == n * kCriteoDense &&
            static_cast<int64_t>(batch.sparse.size()) == n * kCriteoSparse,
        n);
    for (int64_t row = 0; row < n; ++row) {
      const int64_t g = batch.lines[row];
      PSTRAIN_FUZZ_EXPECT(g > last_line && g >= options.start_line, g);
      PSTRAIN_FUZZ_EXPECT((g / options.batch_size) % options.num_workers ==
                              options.worker_index,
                          g);
      last_line = g;
      PSTRAIN_FUZZ_EXPECT(batch.labels[row] == 0 || batch.labels[row] == 1,
                          batch.labels[row]);
      for (int j = 0; j < kCriteoDense; ++j) {
        const float v = batch.dense[row * kCriteoDense + j];
        PSTRAIN_FUZZ_EXPECT(std::isfinite(v) && v >= 0, v);
      }
      if (!plain_lines.empty()) {
        PSTRAIN_FUZZ_EXPECT(g < static_cast<int64_t>(plain_lines.size()), g);
        CheckRowIsLine(batch, row, plain_lines[g]);
      }
    }
    PSTRAIN_FUZZ_EXPECT(batch.next_line > last_line &&
                            batch.next_line == (*reader)->next_line(),
                        batch.next_line);
    pass.batches.push_back(std::move(batch));
  }
  pass.bad_lines = (*reader)->bad_lines();
  PSTRAIN_FUZZ_EXPECT(
      options.bad_lines == BadLines::kSkip || pass.bad_lines == 0,
      pass.bad_lines);
  return pass;
}

}  // namespace
}  // namespace data
}  // namespace pstrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;        // NOLINT: a fuzz entry point.
  using namespace pstrain::data;  // NOLINT
  fuzz::FuzzReader in(data, size);
  const uint8_t flags = in.Byte();
  CriteoReaderOptions options;
  options.bad_lines = (flags & 1) ? BadLines::kSkip : BadLines::kRefuse;
  options.num_workers = 1 + (flags >> 1) % 3;
  options.start_line = (flags >> 3) & 3;
  // Short lines refused as too long, sometimes.
  if (flags & 32) options.max_line_bytes = 64 + (flags >> 6) * 64;
  options.batch_size = 1 + in.Byte() % 8;
  const absl::string_view bytes = in.Rest();
  const std::string path = fuzz::WriteTempFile("train.tsv", bytes);

  // A plain file's lines, as line_reader.h cuts them.
  std::vector<absl::string_view> plain_lines;
  if (!absl::StartsWith(bytes, "\x1f\x8b")) {
    plain_lines = absl::StrSplit(bytes, '\n');
    if (plain_lines.back().empty()) plain_lines.pop_back();
  }

  const absl::StatusOr<int64_t> count =
      CountCriteoLines({path}, options.max_line_bytes);
  if (!count.ok()) {
    PSTRAIN_FUZZ_EXPECT(ErrorNamesFile(count.status(), path),
                        count.status().ToString());
  }
  std::set<int64_t> seen;
  int64_t bad_lines = 0;
  bool failed = false;
  for (int w = 0; w < options.num_workers; ++w) {
    options.worker_index = w;
    const Pass pass = ReadPass(path, options, plain_lines);
    failed |= pass.failed;
    bad_lines += pass.bad_lines;
    for (const CriteoBatch& batch : pass.batches) {
      for (int64_t g : batch.lines) {
        PSTRAIN_FUZZ_EXPECT(seen.insert(g).second, "line ", g, " read twice");
      }
    }
    // Resuming after the first batch gives the second.
    if (pass.batches.size() >= 2) {
      CriteoReaderOptions resumed = options;
      resumed.start_line = pass.batches[0].next_line;
      const Pass rest = ReadPass(path, resumed, plain_lines);
      PSTRAIN_FUZZ_EXPECT(!rest.batches.empty() &&
                              rest.batches[0].lines == pass.batches[1].lines,
                          "a reader resumed at line ", resumed.start_line,
                          " does not continue with the next batch");
    }
  }
  if (count.ok() && !failed) {
    PSTRAIN_FUZZ_EXPECT(static_cast<int64_t>(seen.size()) + bad_lines ==
                            std::max<int64_t>(0, *count - options.start_line),
                        seen.size(), " rows and ", bad_lines, " bad lines of ",
                        *count, " lines from line ", options.start_line);
  }
  if (count.ok() && !plain_lines.empty()) {
    PSTRAIN_FUZZ_EXPECT(*count == static_cast<int64_t>(plain_lines.size()),
                        *count, " lines counted, ", plain_lines.size(),
                        " in the file");
  }
  return 0;
}

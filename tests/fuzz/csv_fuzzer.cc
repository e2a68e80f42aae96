// Fuzzes the CSV reader (data/csv_reader.h) and, through it, the gzip
// reader (data/file_bytes.h). Input: one byte of options, one of
// num_classes, then the file's bytes (raw or gzip). Beyond not crashing,
// checks the header's promises: errors name the file (or the bad option),
// and a dataset read is valid: float32 [N, F] features, all finite, with N
// labels in range.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "data/csv_reader.h"
#include "data/dataset.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;  // NOLINT: a fuzz entry point.
  static constexpr int kLabelColumns[] = {-1, 0, 1, 2, -2, 3, -9, 1 << 30};
  fuzz::FuzzReader in(data, size);
  const uint8_t flags = in.Byte();
  data::CsvOptions options;
  options.header = (flags & 1)    ? data::CsvHeader::kYes
                   : (flags & 16) ? data::CsvHeader::kDetect
                                  : data::CsvHeader::kNo;
  options.label_column = kLabelColumns[(flags >> 1) & 7];
  // 0 (the largest label + 1), 1..254, and -1 (refused).
  const uint8_t classes = in.Byte();
  options.num_classes = classes == 255 ? -1 : classes;
  const std::string path = fuzz::WriteTempFile("data.csv", in.Rest());

  const absl::StatusOr<data::Dataset> dataset = data::ReadCsv(path, options);
  if (!dataset.ok()) {
    const absl::Status& status = dataset.status();
    PSTRAIN_FUZZ_EXPECT(
        status.code() == absl::StatusCode::kInvalidArgument ||
            status.code() == absl::StatusCode::kDataLoss,
        status.ToString());
    PSTRAIN_FUZZ_EXPECT(
        absl::StartsWith(status.message(), absl::StrCat("'", path, "'")) ||
            (options.num_classes < 0 &&
             absl::StartsWith(status.message(), "CsvOptions.num_classes")),
        status.message());
    return 0;
  }
  const data::Dataset& d = *dataset;
  const absl::Status valid = data::ValidateDataset(d);
  PSTRAIN_FUZZ_EXPECT(valid.ok(), valid.message());
  PSTRAIN_FUZZ_EXPECT(d.features.dtype() == DT_FLOAT, d.features.dtype());
  PSTRAIN_FUZZ_EXPECT(d.features.shape().size() == 2 && d.size() > 0 &&
                          d.features.shape()[1] >= 1,
                      ShapeString(d.features.shape()));
  PSTRAIN_FUZZ_EXPECT(
      options.num_classes == 0 || d.num_classes == options.num_classes,
      d.num_classes);
  for (float value : d.features.flat<float>()) {
    PSTRAIN_FUZZ_EXPECT(std::isfinite(value), value);
  }
  // What the worker does with it: scale rows into a batch.
  const std::vector<int64_t> rows = {0, d.size() - 1};
  std::vector<float> batch(rows.size() * d.features.row_elements());
  data::GatherFeatures(d, rows, absl::MakeSpan(batch));
  return 0;
}

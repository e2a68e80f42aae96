// Fuzzes the IDX reader (data/idx_reader.h) and, through it, the gzip
// reader (data/file_bytes.h). Input: one byte choosing num_classes,
// the images file as a record (FuzzReader), then the labels file; each raw
// or gzip. Beyond not crashing, checks the header's promises: errors name
// the file (or the bad option) with the documented codes, and a dataset read
// is valid: uint8 [N, rows, cols] images and N labels in range.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "data/dataset.h"
#include "data/idx_reader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;  // NOLINT: a fuzz entry point.
  fuzz::FuzzReader in(data, size);
  data::IdxOptions options;
  options.num_classes = in.Byte() % 16;  // 0 is refused.
  const std::string images = fuzz::WriteTempFile("images-idx3", in.Record());
  const std::string labels = fuzz::WriteTempFile("labels-idx1", in.Rest());

  const absl::StatusOr<data::Dataset> dataset =
      data::ReadIdx(images, labels, options);
  if (!dataset.ok()) {
    const absl::Status& status = dataset.status();
    PSTRAIN_FUZZ_EXPECT(
        status.code() == absl::StatusCode::kInvalidArgument ||
            status.code() == absl::StatusCode::kDataLoss,
        status.ToString());
    const absl::string_view m = status.message();
    PSTRAIN_FUZZ_EXPECT(absl::StartsWith(m, absl::StrCat("'", images, "'")) ||
                            absl::StartsWith(m, absl::StrCat("'", labels, "'")) ||
                            absl::StartsWith(m, "images file '") ||
                            (options.num_classes == 0 &&
                             absl::StartsWith(m, "IdxOptions.num_classes")),
                        m);
    return 0;
  }
  const data::Dataset& d = *dataset;
  const absl::Status valid = data::ValidateDataset(d);
  PSTRAIN_FUZZ_EXPECT(valid.ok(), valid.message());
  PSTRAIN_FUZZ_EXPECT(d.features.dtype() == DT_UINT8, d.features.dtype());
  PSTRAIN_FUZZ_EXPECT(d.features.shape().size() == 3,
                      ShapeString(d.features.shape()));
  PSTRAIN_FUZZ_EXPECT(d.num_classes == options.num_classes, d.num_classes);
  if (d.size() == 0 || d.features.row_elements() > (1 << 20)) return 0;
  // What the worker does with it: scale rows into a batch.
  const std::vector<int64_t> rows = {0, d.size() - 1};
  std::vector<float> batch(rows.size() * d.features.row_elements());
  data::GatherFeatures(d, rows, absl::MakeSpan(batch));
  return 0;
}

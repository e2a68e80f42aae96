// Reads a CSV file of numeric features and an integer label column into a
// Dataset with float32 features [N, F]. The file may be gzip-compressed.
// The Dataset's origin records each example's line and each feature's
// column, so that later checks (id_features.h) can point into the file.
//
//   CsvOptions options;
//   options.header = CsvHeader::kYes;   // "sepal_length,...,species"
//   absl::StatusOr<Dataset> iris = ReadCsv("/data/iris.csv", options);
//   // iris->features: float32 [150, 4]; labels in 0..2.
//
// The format is plain: fields separated by commas, surrounding whitespace
// ignored, no quoting; "\n" or "\r\n" line ends; blank lines skipped. Every
// row has the same number of fields as the first (the header, if any).
// Features must parse as finite numbers, the label as an integer.
//
// Errors are INVALID_ARGUMENT (or the errno's code when the file cannot be
// read, DATA_LOSS for corrupt gzip) and name the file, the 1-based line and
// the 1-based column: "'a.csv': line 7 has 3 fields, expected 5",
// "'a.csv': line 4, column 2: 'abc' is not a number", "'a.csv': line 9,
// column 5: label 12 out of range, expected 0..9", "'a.csv' is empty".
#ifndef PSTRAIN_DATA_CSV_READER_H_
#define PSTRAIN_DATA_CSV_READER_H_

#include <string>

#include "absl/status/statusor.h"
#include "data/dataset.h"

namespace pstrain {
namespace data {

// Whether the first non-blank line names the columns (it is then not
// parsed): kDetect says yes when none of its fields is a number, so a
// header of names is skipped while a first row of data, or one with a typo
// in it, is read (and refused) as data.
enum class CsvHeader { kNo, kYes, kDetect };

struct CsvOptions {
  // The label's field in a row, 0-based; negative counts from the end, so
  // -1 is the last field. The other fields are the features, in order.
  int label_column = -1;
  CsvHeader header = CsvHeader::kNo;
  // Labels must lie in [0, num_classes); 0 means the largest label + 1.
  int num_classes = 0;
};

absl::StatusOr<Dataset> ReadCsv(const std::string& path,
                                const CsvOptions& options = CsvOptions());

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_CSV_READER_H_

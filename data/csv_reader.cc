#include "data/csv_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "data/file_bytes.h"

namespace pstrain {
namespace data {
namespace {

// Parses data lines one at a time, accumulating features and labels.
class CsvParser {
 public:
  CsvParser(const std::string& path, const CsvOptions& options)
      : path_(path), options_(options) {}

  // Fixes the row width from the first line (header or data).
  absl::Status SetWidth(int line, int width) {
    if (width < 2) {
      return Error(line, absl::StrCat("has ", width,
                                      " field; expected a label and at least "
                                      "one feature"));
    }
    label_column_ = options_.label_column < 0 ? width + options_.label_column
                                              : options_.label_column;
    if (label_column_ < 0 || label_column_ >= width) {
      return Error(line, absl::StrCat("has ", width,
                                      " fields, too few for label_column ",
                                      options_.label_column));
    }
    width_ = width;
    return absl::OkStatus();
  }

  absl::Status ParseRow(int line,
                        const std::vector<absl::string_view>& fields) {
    if (static_cast<int>(fields.size()) != width_) {
      return Error(line, absl::StrCat("has ", fields.size(),
                                      " fields, expected ", width_));
    }
    for (int c = 0; c < width_; ++c) {
      if (c == label_column_) {
        int32_t label;
        if (!absl::SimpleAtoi(fields[c], &label)) {
          return Error(
              line, c,
              absl::StrCat("label '", fields[c], "' is not an integer"));
        }
        if (label < 0 || label > MaxLabel()) {
          return Error(line, c,
                       absl::StrCat("label ", label, " out of range, expected ",
                                    Range(label)));
        }
        labels_.push_back(label);
      } else {
        float value;
        if (!absl::SimpleAtof(fields[c], &value) || !std::isfinite(value)) {
          return Error(
              line, c,
              absl::StrCat("'", fields[c], "' is not a finite number"));
        }
        features_.push_back(value);
      }
    }
    lines_.push_back(line);
    return absl::OkStatus();
  }

  absl::StatusOr<Dataset> Finish(bool saw_header) {
    if (labels_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path_, "' ",
          saw_header ? "has a header but no data rows" : "is empty"));
    }
    Dataset dataset;
    dataset.labels = std::move(labels_);
    dataset.num_classes =
        options_.num_classes > 0
            ? options_.num_classes
            : *std::max_element(dataset.labels.begin(), dataset.labels.end()) +
                  1;
    PSTRAIN_ASSIGN_OR_RETURN(
        dataset.features,
        Tensor::Create(DT_FLOAT, {dataset.size(), width_ - 1}));
    std::memcpy(dataset.features.raw_data(), features_.data(),
                features_.size() * sizeof(float));
    dataset.origin.path = path_;
    dataset.origin.lines = std::move(lines_);
    for (int c = 0; c < width_; ++c) {
      if (c != label_column_) dataset.origin.feature_columns.push_back(c + 1);
    }
    return dataset;
  }

 private:
  // With num_classes 0 there are the largest label + 1 classes, which must
  // be an int too.
  int32_t MaxLabel() const {
    return options_.num_classes > 0 ? options_.num_classes - 1
                                    : std::numeric_limits<int32_t>::max() - 1;
  }
  std::string Range(int32_t label) const {
    if (options_.num_classes > 0) return absl::StrCat("0..", MaxLabel());
    return label < 0 ? std::string(">= 0") : absl::StrCat("<= ", MaxLabel());
  }
  absl::Status Error(int line, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path_, "': line ", line, " ", what));
  }
  absl::Status Error(int line, int column, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path_, "': line ", line, ", column ", column + 1, ": ", what));
  }

  const std::string& path_;
  const CsvOptions& options_;
  int width_ = 0;
  int label_column_ = 0;
  std::vector<float> features_;
  std::vector<int32_t> labels_;
  std::vector<int64_t> lines_;  // Of each data row.
};

// Whether no field reads as a number.
bool NoNumbers(const std::vector<absl::string_view>& fields) {
  for (absl::string_view field : fields) {
    double value;
    if (absl::SimpleAtod(field, &value)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<Dataset> ReadCsv(const std::string& path,
                                const CsvOptions& options) {
  if (options.num_classes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CsvOptions.num_classes is ", options.num_classes, "; must be >= 0"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(FileBytes file, ReadFileBytes(path));
  CsvParser parser(path, options);
  std::vector<absl::string_view> fields;
  bool first = true;
  bool saw_header = false;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(file.bytes, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);  // Also a "\r" before "\n".
    if (line.empty()) continue;
    fields.clear();
    for (absl::string_view field : absl::StrSplit(line, ',')) {
      fields.push_back(absl::StripAsciiWhitespace(field));
    }
    if (first) {
      PSTRAIN_RETURN_IF_ERROR(
          parser.SetWidth(line_number, static_cast<int>(fields.size())));
      first = false;
      saw_header = options.header == CsvHeader::kYes ||
                   (options.header == CsvHeader::kDetect && NoNumbers(fields));
      if (saw_header) continue;
    }
    PSTRAIN_RETURN_IF_ERROR(parser.ParseRow(line_number, fields));
  }
  return parser.Finish(saw_header);
}

}  // namespace data
}  // namespace pstrain

#include "chief/history.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pstrain {
namespace chief {
namespace {

// The shortest decimal that reads back as `value` (as Python's repr).
std::string Shortest(double value) {
  char buffer[64];
  const std::to_chars_result result =
      std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string CsvNumber(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return Shortest(value);
}

std::string JsonNumber(double value) {
  return std::isfinite(value) ? Shortest(value) : "null";
}

// A CSV cell ToCsv wrote, or nullopt for "NA".
absl::StatusOr<std::optional<double>> ParseCell(absl::string_view cell) {
  if (cell == "NA") return std::nullopt;
  if (cell == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (cell == "inf") return std::numeric_limits<double>::infinity();
  if (cell == "-inf") return -std::numeric_limits<double>::infinity();
  double value = 0;
  if (!absl::SimpleAtod(cell, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", cell, "\" is not a number"));
  }
  return value;
}

}  // namespace

absl::StatusOr<History> History::FromCsv(absl::string_view csv,
                                         int64_t before) {
  const std::vector<absl::string_view> lines =
      absl::StrSplit(csv, '\n', absl::SkipEmpty());
  if (lines.empty()) return History();
  const std::vector<std::string> names = absl::StrSplit(lines[0], ',');
  if (names[0] != "epoch") {
    return absl::InvalidArgumentError(
        "line 1: the header does not start with \"epoch\"");
  }
  History history;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<absl::string_view> cells = absl::StrSplit(lines[i], ',');
    if (cells.size() != names.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", i + 1, ": ", cells.size(), " cells, not ", names.size()));
    }
    int64_t epoch = 0;
    if (!absl::SimpleAtoi(cells[0], &epoch) || epoch < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", i + 1, ": epoch \"", cells[0], "\" is not a count"));
    }
    if (epoch >= before) continue;
    for (size_t c = 1; c < cells.size(); ++c) {
      absl::StatusOr<std::optional<double>> value = ParseCell(cells[c]);
      if (!value.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "line ", i + 1, ", ", names[c], ": ", value.status().message()));
      }
      if (value->has_value()) history.Set(epoch, names[c], **value);
    }
  }
  return history;
}

void History::Set(int64_t epoch, const std::string& name, double value) {
  epochs_[epoch][name] = value;
  names_.insert(name);
}

std::optional<double> History::Get(int64_t epoch,
                                   const std::string& name) const {
  const auto row = epochs_.find(epoch);
  if (row == epochs_.end()) return std::nullopt;
  const auto value = row->second.find(name);
  if (value == row->second.end()) return std::nullopt;
  return value->second;
}

std::string History::ToCsv() const {
  std::string csv = "epoch";
  for (const std::string& name : names_) absl::StrAppend(&csv, ",", name);
  csv += "\n";
  for (const auto& [epoch, values] : epochs_) {
    absl::StrAppend(&csv, epoch);
    for (const std::string& name : names_) {
      const auto value = values.find(name);
      absl::StrAppend(&csv, ",",
                      value == values.end() ? "NA" : CsvNumber(value->second));
    }
    csv += "\n";
  }
  return csv;
}

std::string History::ToJson() const {
  std::vector<std::string> columns;
  std::vector<std::string> epochs;
  for (const auto& [epoch, values] : epochs_)
    epochs.push_back(absl::StrCat(epoch));
  columns.push_back(
      absl::StrCat("\"epoch\": [", absl::StrJoin(epochs, ", "), "]"));
  for (const std::string& name : names_) {
    std::vector<std::string> column;
    for (const auto& [epoch, values] : epochs_) {
      const auto value = values.find(name);
      column.push_back(value == values.end() ? "null"
                                             : JsonNumber(value->second));
    }
    // Names are Keras metric names (letters, digits, underscores): nothing
    // to escape.
    columns.push_back(
        absl::StrCat("\"", name, "\": [", absl::StrJoin(column, ", "), "]"));
  }
  return absl::StrCat("{", absl::StrJoin(columns, ", "), "}");
}

}  // namespace chief
}  // namespace pstrain

#include "data/criteo_line.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "data/criteo_hash.h"

namespace pstrain {
namespace data {
namespace {

// Each byte's hex value, or -1: one load per digit where three range tests
// were (26 hex fields a line make this the reader's hottest loop).
constexpr std::array<int8_t, 256> HexValues() {
  std::array<int8_t, 256> values{};
  for (int c = 0; c < 256; ++c) {
    values[c] = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
  }
  return values;
}
constexpr std::array<int8_t, 256> kHexValues = HexValues();

int HexDigit(char c) { return kHexValues[static_cast<unsigned char>(c)]; }

// The decimal int64 `text`, or false.
bool ParseInt64(absl::string_view text, int64_t* value) {
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) text.remove_prefix(1);
  if (text.empty()) return false;
  // Accumulated as a magnitude, which for a negative number may reach 2^63.
  const uint64_t limit =
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) +
      (negative ? 1 : 0);
  uint64_t magnitude = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (magnitude > (limit - digit) / 10) return false;
    magnitude = magnitude * 10 + digit;
  }
  *value = negative ? static_cast<int64_t>(0 - magnitude)
                    : static_cast<int64_t>(magnitude);
  return true;
}

// `text` for an error message: quoted, cut to 40 bytes.
std::string Quote(absl::string_view text) {
  if (text.size() <= 40) return absl::StrCat("'", text, "'");
  return absl::StrCat("'", text.substr(0, 40), "...' (", text.size(),
                      " bytes)");
}

absl::Status ColumnError(int column, absl::string_view text,
                         absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("column ", column + 1, " (", CriteoColumnName(column),
                   "): ", Quote(text), " ", what));
}

}  // namespace

std::string CriteoColumnName(int column) {
  if (column == 0) return "label";
  if (column <= kCriteoDense) return absl::StrCat("I", column);
  return absl::StrCat("C", column - kCriteoDense);
}

float CriteoDenseValue(int64_t x) {
  // Most integer features are small: theirs come from a table of the same
  // values (13 log1p calls a line were about a fifth of the reader's samples).
  constexpr int64_t kTabled = 1024;
  static const std::array<float, kTabled>* const tabled = [] {
    auto* values = new std::array<float, kTabled>;
    for (int64_t v = 0; v < kTabled; ++v) {
      (*values)[v] = static_cast<float>(std::log1p(static_cast<double>(v)));
    }
    return values;
  }();
  if (x < kTabled) return (*tabled)[std::max<int64_t>(x, 0)];
  return static_cast<float>(std::log1p(static_cast<double>(x)));
}

bool ParseCriteoHex(absl::string_view text, uint64_t* value) {
  if (text.empty()) return false;
  size_t zeros = 0;
  while (zeros < text.size() && text[zeros] == '0') ++zeros;
  if (text.size() - zeros > 16) return false;
  uint64_t v = 0;
  int any_bad = 0;  // negative once a byte is not a digit: checked at the end
  for (size_t i = zeros; i < text.size(); ++i) {
    const int digit = HexDigit(text[i]);
    any_bad |= digit;
    v = (v << 4) | static_cast<uint64_t>(digit & 15);
  }
  if (any_bad < 0) return false;
  *value = v;
  return true;
}

absl::Status ParseCriteoLine(absl::string_view line, float* label, float* dense,
                             uint64_t* sparse) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const char* p = line.data();
  const char* const end = p + line.size();
  for (int column = 0; column < kCriteoColumns; ++column) {
    const char* tab = static_cast<const char*>(
        std::memchr(p, '\t', static_cast<size_t>(end - p)));
    const bool last = column == kCriteoColumns - 1;
    if ((tab == nullptr) != last) {
      int columns = 1;
      for (const char c : line) columns += c == '\t';
      return absl::InvalidArgumentError(absl::StrCat(
          "the line has ", columns, " tab-separated column",
          columns == 1 ? "" : "s", "; a Criteo line has ", kCriteoColumns,
          " (label, I1..I13, C1..C26)",
          columns == kCriteoColumns - 1
              ? ": no label? (the Kaggle set's test.txt has none: test on "
                "labelled lines, e.g. a part of train.txt)"
              : ""));
    }
    const absl::string_view text(p,
                                 static_cast<size_t>((last ? end : tab) - p));
    p = last ? end : tab + 1;
    if (column == 0) {
      if (text == "0") {
        *label = 0.0f;
      } else if (text == "1") {
        *label = 1.0f;
      } else {
        return ColumnError(column, text, "is not a label (0 or 1)");
      }
    } else if (column <= kCriteoDense) {
      int64_t x = 0;
      if (!text.empty() && !ParseInt64(text, &x)) {
        return ColumnError(column, text, "is not a 64-bit integer");
      }
      dense[column - 1] = CriteoDenseValue(x);
    } else {
      const int field = column - kCriteoDense;  // 1..26
      if (text.empty()) {
        sparse[field - 1] = CriteoMissingId(field);
        continue;
      }
      uint64_t value = 0;
      if (!ParseCriteoHex(text, &value)) {
        bool hex = true;
        for (const char c : text) hex = hex && HexDigit(c) >= 0;
        return ColumnError(column, text,
                           hex ? "has more than 16 significant hex digits "
                                 "(does not fit 64 bits)"
                               : "is not a hex number");
      }
      sparse[field - 1] = CriteoSparseId(field, value);
    }
  }
  return absl::OkStatus();
}

}  // namespace data
}  // namespace pstrain

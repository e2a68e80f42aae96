#include "data/criteo_line.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/criteo_hash.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

// A line from its 40 columns.
std::string Line(const std::vector<std::string>& columns) {
  return absl::StrJoin(columns, "\t");
}

// Label 1, every feature empty, then `column` (0-based) set to `text`.
std::string LineWith(int column, const std::string& text) {
  std::vector<std::string> columns(kCriteoColumns);
  columns[0] = "1";
  columns[column] = text;
  return Line(columns);
}

struct Parsed {
  absl::Status status;
  float label = -1;
  float dense[kCriteoDense];
  uint64_t sparse[kCriteoSparse];
};

Parsed Parse(const std::string& line) {
  Parsed p;
  p.status = ParseCriteoLine(line, &p.label, p.dense, p.sparse);
  return p;
}

void ExpectRefused(const std::string& line, const std::string& message) {
  const Parsed p = Parse(line);
  EXPECT_EQ(p.status.code(), absl::StatusCode::kInvalidArgument)
      << "line: " << line;
  EXPECT_NE(p.status.message().find(message), absl::string_view::npos)
      << p.status << "\nwanted: " << message;
}

TEST(CriteoLine, EveryFieldFull) {
  std::vector<std::string> columns = {"0"};
  for (int j = 1; j <= kCriteoDense; ++j) {
    columns.push_back(std::to_string(j * 10 - 3));  // 7, 17, ..., 127
  }
  for (int k = 1; k <= kCriteoSparse; ++k) {
    columns.push_back(absl::StrCat(absl::Hex(0x68fd1e00 + k, absl::kZeroPad8)));
  }
  const Parsed p = Parse(Line(columns));
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.label, 0.0f);
  for (int j = 1; j <= kCriteoDense; ++j) {
    EXPECT_FLOAT_EQ(p.dense[j - 1], std::log(1.0 + (j * 10 - 3))) << "I" << j;
  }
  for (int k = 1; k <= kCriteoSparse; ++k) {
    EXPECT_EQ(p.sparse[k - 1], CriteoSparseId(k, 0x68fd1e00 + k)) << "C" << k;
  }
}

TEST(CriteoLine, EveryFeatureEmpty) {
  const Parsed p = Parse(LineWith(0, "1"));
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.label, 1.0f);
  for (int j = 0; j < kCriteoDense; ++j) EXPECT_EQ(p.dense[j], 0.0f);
  for (int k = 1; k <= kCriteoSparse; ++k) {
    EXPECT_EQ(p.sparse[k - 1], CriteoMissingId(k)) << "C" << k;
  }
}

TEST(CriteoLine, IdsFromTextMatchAnIndependentComputation) {
  // criteo_hash_test's Python-computed ids, reached from the text.
  Parsed p = Parse(LineWith(kCriteoDense + 1, "68fd1e64"));
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.sparse[0], 0x7132bda5bf5ef2bdULL);
  EXPECT_EQ(p.sparse[1], 0xf36a5a49db5899faULL);  // C2 missing
  p = Parse(LineWith(kCriteoDense + 26, "3B183C5C"));
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.sparse[25], 0x3f5268f66966e3d9ULL);
}

TEST(CriteoLine, IntegerFeaturesAreLogOnePlusClampedAtZero) {
  const struct {
    std::string text;
    double want;
  } cases[] = {
      {"0", 0.0},
      {"-1", 0.0},
      {"-9223372036854775808", 0.0},
      {"1", std::log(2.0)},
      {"0007", std::log(8.0)},
      {"9223372036854775807", std::log1p(9223372036854775807.0)},
  };
  for (const auto& c : cases) {
    const Parsed p = Parse(LineWith(5, c.text));  // I5
    ASSERT_TRUE(p.status.ok()) << c.text << ": " << p.status;
    EXPECT_FLOAT_EQ(p.dense[4], static_cast<float>(c.want)) << c.text;
    EXPECT_EQ(p.dense[3], 0.0f);  // I4, empty
  }
}

TEST(CriteoLine, DenseValuesEqualLog1pExactlyOnBothSidesOfTheTable) {
  // Small values come from a table, larger ones from log1p: every value
  // must be the float of log1p(x) either way.
  for (int64_t x = -3; x < 3000; ++x) {
    const float want =
        static_cast<float>(std::log1p(static_cast<double>(x < 0 ? 0 : x)));
    ASSERT_EQ(CriteoDenseValue(x), want) << x;
  }
}

TEST(CriteoLine, MalformedIntegersAreRefusedNamingTheColumn) {
  for (const std::string text :
       {"1.5", "+3", " 3", "3 ", "-", "--1", "1e3", "0x10", "abc",
        "9223372036854775808", "-9223372036854775809"}) {
    ExpectRefused(LineWith(5, text), absl::StrCat("column 6 (I5): '", text,
                                                  "' is not a 64-bit integer"));
  }
}

TEST(CriteoLine, HexCaseAndLeadingZerosDoNotChangeTheId) {
  const uint64_t want = CriteoSparseId(3, 0xabcdef);
  for (const std::string text : {"abcdef", "ABCDEF", "AbCdEf", "00abcdef",
                                 "0000000000000000000000abcdef"}) {
    const Parsed p = Parse(LineWith(kCriteoDense + 3, text));
    ASSERT_TRUE(p.status.ok()) << text << ": " << p.status;
    EXPECT_EQ(p.sparse[2], want) << text;
  }
  Parsed p = Parse(LineWith(kCriteoDense + 3, "0"));
  ASSERT_TRUE(p.status.ok());
  EXPECT_EQ(p.sparse[2], CriteoSparseId(3, 0));
  EXPECT_NE(p.sparse[2], CriteoMissingId(3));
  p = Parse(LineWith(kCriteoDense + 3, "FFFFFFFFFFFFFFFF"));  // 16 digits
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.sparse[2], CriteoSparseId(3, ~uint64_t{0}));
}

TEST(CriteoLine, LongOrNonHexValuesAreRefused) {
  ExpectRefused(LineWith(kCriteoDense + 4, "10000000000000000"),
                "column 18 (C4): '10000000000000000' has more than 16 "
                "significant hex digits");
  for (const std::string text :
       {"xyz", "0x1f", "1f ", " 1f", "-1", "1g", "12345678901234567890g"}) {
    ExpectRefused(
        LineWith(kCriteoDense + 4, text),
        absl::StrCat("column 18 (C4): '", text, "' is not a hex number"));
  }
  // A long value is cut in the message.
  ExpectRefused(LineWith(kCriteoDense + 4, std::string(100, 'z')),
                "...' (100 bytes) is not a hex number");
}

TEST(CriteoLine, LabelMustBeZeroOrOne) {
  for (const std::string text : {"", "2", "0.5", "-1", "01", "true"}) {
    ExpectRefused(LineWith(0, text), absl::StrCat("column 1 (label): '", text,
                                                  "' is not a label (0 or 1)"));
  }
}

TEST(CriteoLine, CrlfIsToleratedOnce) {
  const std::string line = LineWith(kCriteoDense + 26, "ff");
  const Parsed p = Parse(line + "\r");
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.sparse[25], CriteoSparseId(26, 0xff));
  // An empty last column before the CR.
  const Parsed empty_last = Parse(LineWith(1, "5") + "\r");
  ASSERT_TRUE(empty_last.status.ok()) << empty_last.status;
  EXPECT_EQ(empty_last.sparse[25], CriteoMissingId(26));
  ExpectRefused(line + "\r\r", "column 40 (C26): 'ff\r' is not a hex number");
  ExpectRefused(LineWith(3, "4\r"), "column 4 (I3)");
}

TEST(CriteoLine, WrongColumnCountIsRefused) {
  std::vector<std::string> columns(kCriteoColumns);
  columns[0] = "0";
  std::vector<std::string> short_columns(columns.begin(), columns.end() - 1);
  ExpectRefused(Line(short_columns),
                "the line has 39 tab-separated columns; a Criteo line has 40 "
                "(label, I1..I13, C1..C26): no label? (the Kaggle set's "
                "test.txt has none");
  columns.push_back("");
  ExpectRefused(Line(columns), "the line has 41 tab-separated columns");
  EXPECT_EQ(Parse(Line(columns)).status.message().find("no label"),
            absl::string_view::npos);
  ExpectRefused("", "the line has 1 tab-separated column;");
  ExpectRefused("0 1 2 3", "the line has 1 tab-separated column;");
}

TEST(CriteoLine, ColumnNames) {
  EXPECT_EQ(CriteoColumnName(0), "label");
  EXPECT_EQ(CriteoColumnName(1), "I1");
  EXPECT_EQ(CriteoColumnName(13), "I13");
  EXPECT_EQ(CriteoColumnName(14), "C1");
  EXPECT_EQ(CriteoColumnName(39), "C26");
}

}  // namespace
}  // namespace data
}  // namespace pstrain

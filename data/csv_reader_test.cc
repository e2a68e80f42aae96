#include "data/csv_reader.h"

#include <string>
#include <vector>

#include "data/test_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  WriteFile(path, text);
  return path;
}

std::vector<float> Features(const Dataset& d) {
  return std::vector<float>(d.features.flat<float>().begin(),
                            d.features.flat<float>().end());
}

// Expects `text` to be refused with INVALID_ARGUMENT and message
// "'<path>'" + `message`.
void ExpectError(const std::string& text, const std::string& message,
                 const CsvOptions& options = CsvOptions()) {
  const std::string path = Write("bad.csv", text);
  absl::Status status = ReadCsv(path, options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
  EXPECT_EQ(status.message(), "'" + path + "'" + message) << text;
}

TEST(CsvReader, ReadsFeaturesAndLastColumnLabel) {
  absl::StatusOr<Dataset> d =
      ReadCsv(Write("plain.csv", "1.5, -2, 3e2, 0\n4,5,6,2\r\n\n7,8,9,1\n"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->features.dtype(), DT_FLOAT);
  EXPECT_EQ(d->features.shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(Features(*d), (std::vector<float>{1.5, -2, 300, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(d->labels, (std::vector<int32_t>{0, 2, 1}));
  EXPECT_EQ(d->num_classes, 3);  // Inferred: largest label + 1.
}

TEST(CsvReader, HonoursHeaderLabelColumnAndNumClasses) {
  CsvOptions options;
  options.header = CsvHeader::kYes;
  options.label_column = 0;
  options.num_classes = 10;
  absl::StatusOr<Dataset> d =
      ReadCsv(Write("header.csv", "label,x,y\n3,0.25,0.5\n1,1,2\n"), options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Features(*d), (std::vector<float>{0.25, 0.5, 1, 2}));
  EXPECT_EQ(d->labels, (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(d->num_classes, 10);
}

TEST(CsvReader, DetectsAHeaderOfNamesOnly) {
  CsvOptions options;
  options.header = CsvHeader::kDetect;
  absl::StatusOr<Dataset> d =
      ReadCsv(Write("named.csv", "x, y ,label\n1,2,0\n3,4,1\n"), options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Features(*d), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(d->origin.lines, (std::vector<int64_t>{2, 3}));
  d = ReadCsv(Write("unnamed.csv", "1,2,0\n3,4,1\n"), options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Features(*d), (std::vector<float>{1, 2, 3, 4}));
  // A first row with a number in it is data, typo or not.
  ExpectError("1,2x,0\n3,4,1\n",
              ": line 1, column 2: '2x' is not a finite number", options);
  ExpectError("x,y,label\n", " has a header but no data rows", options);
}

TEST(CsvReader, ReadsGzipFile) {
  absl::StatusOr<Dataset> d = ReadCsv(Write("zipped.csv.gz", Gzip("1,2,1\n")));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Features(*d), (std::vector<float>{1, 2}));
}

TEST(CsvReader, RaggedRowNamesLineAndFieldCounts) {
  ExpectError(
      "1,2,3,4,0\n1,2,3,4,0\n\n1,2,3,4,1\n1,2,3,4,1\n1,2,3,4,1\n1,2,0\n",
      ": line 7 has 3 fields, expected 5");
}

TEST(CsvReader, NonNumericFeatureNamesLineAndColumn) {
  ExpectError("1,2,0\n1,2,0\n1,2,0\n5,abc,1\n",
              ": line 4, column 2: 'abc' is not a finite number");
  ExpectError("1,inf,0\n", ": line 1, column 2: 'inf' is not a finite number");
}

TEST(CsvReader, LabelMustBeAnInteger) {
  ExpectError("1,2,0\n1,2,3.5\n",
              ": line 2, column 3: label '3.5' is not an integer");
}

TEST(CsvReader, LabelOutOfRangeNamesLineAndColumn) {
  CsvOptions options;
  options.num_classes = 10;
  ExpectError("1,2,3,4,9\n1,2,3,4,12\n",
              ": line 2, column 5: label 12 out of range, expected 0..9",
              options);
  ExpectError("1,-1\n",
              ": line 1, column 2: label -1 out of range, expected >= 0");
}

TEST(CsvReader, LabelColumnBeyondRowIsRefused) {
  CsvOptions options;
  options.label_column = 4;
  ExpectError("1,2,3\n", ": line 1 has 3 fields, too few for label_column 4",
              options);
}

TEST(CsvReader, SingleColumnIsRefused) {
  ExpectError("\n7\n",
              ": line 2 has 1 field; expected a label and at least one "
              "feature");
}

TEST(CsvReader, EmptyFileIsRefused) {
  ExpectError("", " is empty");
  ExpectError("\n \n", " is empty");
  CsvOptions options;
  options.header = CsvHeader::kYes;
  ExpectError("a,b,label\n", " has a header but no data rows", options);
}

TEST(CsvReader, MissingFileIsNotFound) {
  const std::string path = TempPath("absent.csv");
  absl::Status status = ReadCsv(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("'" + path + "'"));
}

}  // namespace
}  // namespace data
}  // namespace pstrain

#include "data/idx_reader.h"

#include <string>
#include <vector>

#include "data/test_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

// Writes `bytes` to a fresh file named `name` and returns its path.
std::string Write(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  WriteFile(path, bytes);
  return path;
}

// Expects ReadIdx to fail with `code` and exactly `message`.
void ExpectError(const std::string& images, const std::string& labels,
                 absl::StatusCode code, const std::string& message,
                 int num_classes = 10) {
  IdxOptions options;
  options.num_classes = num_classes;
  absl::Status status = ReadIdx(images, labels, options).status();
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_EQ(status.message(), message);
}

TEST(IdxReader, ReadsRawImagesAndLabels) {
  const std::string images = Write("raw-images", IdxImages(3, 2, 4));
  const std::string labels = Write("raw-labels", IdxLabels({7, 0, 9}));
  absl::StatusOr<Dataset> d = ReadIdx(images, labels);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->features.dtype(), DT_UINT8);
  EXPECT_EQ(d->features.shape(), (std::vector<int64_t>{3, 2, 4}));
  EXPECT_EQ(d->labels, (std::vector<int32_t>{7, 0, 9}));
  EXPECT_EQ(d->num_classes, 10);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 8; ++j) {
      EXPECT_EQ(d->features.data<uint8_t>()[i * 8 + j], PixelValue(i, j));
    }
  }
}

TEST(IdxReader, GzipAndRawFilesGiveTheSameDataset) {
  const std::string bytes = IdxImages(5, 3, 3);
  const std::vector<uint8_t> label_values = {1, 2, 3, 4, 5};
  absl::StatusOr<Dataset> raw =
      ReadIdx(Write("same-images", bytes),
              Write("same-labels", IdxLabels(label_values)));
  absl::StatusOr<Dataset> gz =
      ReadIdx(Write("same-images.gz", Gzip(bytes)),
              Write("same-labels.gz", Gzip(IdxLabels(label_values))));
  ASSERT_TRUE(raw.ok()) << raw.status();
  ASSERT_TRUE(gz.ok()) << gz.status();
  EXPECT_EQ(gz->features.shape(), raw->features.shape());
  EXPECT_EQ(gz->labels, raw->labels);
  EXPECT_EQ(std::string(static_cast<const char*>(gz->features.raw_data()), 45),
            bytes.substr(16));
}

TEST(IdxReader, MissingFileIsNotFound) {
  const std::string labels = Write("missing-labels", IdxLabels({1}));
  const std::string images = TempPath("no-such-images");
  absl::Status status = ReadIdx(images, labels).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("'" + images + "'"));
}

TEST(IdxReader, WrongMagicPrintsExpectedAndFoundInHex) {
  const std::string labels = Write("magic-labels", IdxLabels({1}));
  // A labels file where the images belong.
  ExpectError(labels, labels, absl::StatusCode::kInvalidArgument,
              "'" + labels +
                  "': wrong magic number 0x00000801, expected 0x00000803 (IDX "
                  "images: uint8, 3 dims)");
  const std::string images = Write("magic-images", IdxImages(1, 1, 1));
  ExpectError(images, images, absl::StatusCode::kInvalidArgument,
              "'" + images +
                  "': wrong magic number 0x00000803, expected 0x00000801 (IDX "
                  "labels: uint8, 1 dim)");
}

TEST(IdxReader, TruncatedHeaderIsDataLoss) {
  const std::string images =
      Write("short-header", IdxImages(2, 2, 2).substr(0, 9));
  const std::string labels = Write("short-header-labels", IdxLabels({1, 2}));
  ExpectError(images, labels, absl::StatusCode::kDataLoss,
              "'" + images + "': truncated header: expected 16 bytes, found 9");
}

TEST(IdxReader, TruncatedDataNamesExpectedFoundAndOffset) {
  const std::string bytes = IdxImages(10, 4, 4);  // 16 + 160 bytes.
  const std::string labels =
      Write("trunc-labels", IdxLabels(std::vector<uint8_t>(10, 1)));
  const std::string raw = Write("trunc-images", bytes.substr(0, 150));
  ExpectError(raw, labels, absl::StatusCode::kDataLoss,
              "'" + raw +
                  "': truncated: header says 10 x 4 x 4, expected 160 bytes "
                  "of data at offset 16, found 134");
  const std::string gz = Write("trunc-images.gz", Gzip(bytes.substr(0, 150)));
  ExpectError(gz, labels, absl::StatusCode::kDataLoss,
              "'" + gz +
                  "': truncated: header says 10 x 4 x 4, expected 160 bytes "
                  "of data at offset 16 of the decompressed data, found 134");
}

TEST(IdxReader, BytesAfterTheDataAreRefused) {
  const std::string images = Write("extra-images", IdxImages(2, 2, 2) + "zz");
  const std::string labels = Write("extra-labels", IdxLabels({1, 2}));
  ExpectError(
      images, labels, absl::StatusCode::kInvalidArgument,
      "'" + images + "': 2 unexpected bytes after the data, at offset 24");
}

TEST(IdxReader, CountMismatchNamesBothFiles) {
  const std::string images = Write("count-images", IdxImages(3, 2, 2));
  const std::string labels = Write("count-labels", IdxLabels({1, 2}));
  ExpectError(images, labels, absl::StatusCode::kInvalidArgument,
              "images file '" + images + "' has 3 images but labels file '" +
                  labels + "' has 2 labels");
}

TEST(IdxReader, LabelOutOfRangeNamesValueAndIndex) {
  std::vector<uint8_t> values(400, 3);
  values[345] = 12;
  const std::string images = Write("range-images", IdxImages(400, 1, 1));
  const std::string labels = Write("range-labels.gz", Gzip(IdxLabels(values)));
  ExpectError(images, labels, absl::StatusCode::kInvalidArgument,
              "'" + labels +
                  "': label 12 at index 345 (offset 353 of the decompressed "
                  "data), expected 0..9");
}

TEST(IdxReader, NumClassesIsConfigurable) {
  const std::string images = Write("classes-images", IdxImages(2, 1, 1));
  const std::string labels = Write("classes-labels", IdxLabels({0, 12}));
  IdxOptions options;
  options.num_classes = 13;
  absl::StatusOr<Dataset> d = ReadIdx(images, labels, options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_classes, 13);
  ExpectError(images, labels, absl::StatusCode::kInvalidArgument,
              "'" + labels + "': label 12 at index 1 (offset 9), expected 0..3",
              /*num_classes=*/4);
}

TEST(IdxReader, CorruptGzipIsDataLossNamingTheFile) {
  std::string gz = Gzip(IdxImages(20, 8, 8));
  gz[gz.size() - 3] ^= 0x40;  // In the length trailer.
  const std::string images = Write("corrupt-images.gz", gz);
  const std::string labels = Write("corrupt-labels", IdxLabels({1}));
  absl::Status status = ReadIdx(images, labels).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()),
              ::testing::StartsWith("'" + images + "': corrupt gzip stream"));
}

}  // namespace
}  // namespace data
}  // namespace pstrain

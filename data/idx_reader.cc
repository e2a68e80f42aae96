#include "data/idx_reader.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "data/file_bytes.h"

namespace pstrain {
namespace data {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // uint8, 3 dimensions.
constexpr uint32_t kLabelsMagic = 0x00000801;  // uint8, 1 dimension.

uint32_t ReadBigEndian32(const std::string& bytes, size_t offset) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) {
    v = (v << 8) | static_cast<unsigned char>(bytes[offset + i]);
  }
  return v;
}

std::string Offset(size_t offset, bool gzipped) {
  return absl::StrCat("offset ", offset,
                      gzipped ? " of the decompressed data" : "");
}

// An IDX file's array: its dimensions and where its data starts.
struct IdxArray {
  std::vector<int64_t> dims;
  size_t data_offset = 0;
  int64_t num_bytes = 0;
};

// Checks that `file` holds one uint8 array with `magic`, whose low byte is its
// rank, and nothing else.
absl::StatusOr<IdxArray> ParseIdx(const std::string& path,
                                  const FileBytes& file, uint32_t magic,
                                  absl::string_view what) {
  const std::string& bytes = file.bytes;
  const int rank = magic & 0xff;
  IdxArray array;
  array.data_offset = 4 + 4 * rank;
  if (bytes.size() < 4) {
    return absl::DataLossError(
        absl::StrCat("'", path, "': truncated header: expected ",
                     array.data_offset, " bytes, found ", bytes.size()));
  }
  const uint32_t found = ReadBigEndian32(bytes, 0);
  if (found != magic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s': wrong magic number 0x%08x, expected 0x%08x (IDX %s)", path,
        found, magic, what));
  }
  if (bytes.size() < array.data_offset) {
    return absl::DataLossError(
        absl::StrCat("'", path, "': truncated header: expected ",
                     array.data_offset, " bytes, found ", bytes.size()));
  }
  for (int i = 0; i < rank; ++i) {
    array.dims.push_back(ReadBigEndian32(bytes, 4 + 4 * i));
  }
  absl::StatusOr<int64_t> n = NumElements(array.dims, 1);
  if (!n.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "': header dimensions ",
                     ShapeString(array.dims), " are too large"));
  }
  array.num_bytes = *n;
  const int64_t available = bytes.size() - array.data_offset;
  if (available < array.num_bytes) {
    return absl::DataLossError(absl::StrCat(
        "'", path, "': truncated: header says ",
        absl::StrJoin(array.dims, " x "), ", expected ", array.num_bytes,
        " bytes of data at ", Offset(array.data_offset, file.gzipped),
        ", found ", available));
  }
  if (available > array.num_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "': ", available - array.num_bytes,
        " unexpected bytes after the data, at ",
        Offset(array.data_offset + array.num_bytes, file.gzipped)));
  }
  return array;
}

}  // namespace

absl::StatusOr<Dataset> ReadIdx(const std::string& images_path,
                                const std::string& labels_path,
                                const IdxOptions& options) {
  if (options.num_classes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IdxOptions.num_classes is ", options.num_classes, "; must be >= 1"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(FileBytes images, ReadFileBytes(images_path));
  PSTRAIN_ASSIGN_OR_RETURN(
      IdxArray image_array,
      ParseIdx(images_path, images, kImagesMagic, "images: uint8, 3 dims"));
  PSTRAIN_ASSIGN_OR_RETURN(FileBytes labels, ReadFileBytes(labels_path));
  PSTRAIN_ASSIGN_OR_RETURN(
      IdxArray label_array,
      ParseIdx(labels_path, labels, kLabelsMagic, "labels: uint8, 1 dim"));
  if (image_array.dims[0] != label_array.dims[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("images file '", images_path, "' has ",
                     image_array.dims[0], " images but labels file '",
                     labels_path, "' has ", label_array.dims[0], " labels"));
  }

  Dataset dataset;
  dataset.num_classes = options.num_classes;
  dataset.labels.resize(label_array.dims[0]);
  for (size_t i = 0; i < dataset.labels.size(); ++i) {
    const size_t offset = label_array.data_offset + i;
    const int label = static_cast<unsigned char>(labels.bytes[offset]);
    if (label >= options.num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", labels_path, "': label ", label, " at index ", i,
                       " (", Offset(offset, labels.gzipped), "), expected 0..",
                       options.num_classes - 1));
    }
    dataset.labels[i] = label;
  }
  PSTRAIN_ASSIGN_OR_RETURN(dataset.features,
                           Tensor::Create(DT_UINT8, image_array.dims));
  if (image_array.num_bytes > 0) {
    std::memcpy(dataset.features.raw_data(),
                images.bytes.data() + image_array.data_offset,
                image_array.num_bytes);
  }
  return dataset;
}

}  // namespace data
}  // namespace pstrain

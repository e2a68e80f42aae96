// Reads MNIST-style IDX files (http://yann.lecun.com/exdb/mnist/) into a
// Dataset: an images file (magic 0x00000803: uint8 [N, rows, cols]) and a
// labels file (magic 0x00000801: uint8 [N]), each raw or gzip-compressed.
// Header integers are big-endian: the magic, then one count per dimension.
//
//   absl::StatusOr<Dataset> train =
//       ReadIdx("/data/train-images-idx3-ubyte.gz",
//               "/data/train-labels-idx1-ubyte.gz");
//   // train->features: uint8 [60000, 28, 28]; 60000 labels in 0..9.
//
// Images stay uint8 (a quarter of float32's memory); GatherFeatures scales
// them to [0, 1] when batching. Errors start with the file's path:
//   NOT_FOUND, PERMISSION_DENIED  the file cannot be opened;
//   DATA_LOSS         a corrupt gzip stream, or a file shorter than its
//                     header says ("expected 7840000 bytes of data at offset
//                     16, found 7839000");
//   INVALID_ARGUMENT  a wrong magic number (expected and found, in hex),
//                     bytes after the data, different image and label counts,
//                     a label outside 0..num_classes-1 (with its index).
// In a gzip file, offsets count decompressed bytes, and messages say so.
#ifndef PSTRAIN_DATA_IDX_READER_H_
#define PSTRAIN_DATA_IDX_READER_H_

#include <string>

#include "absl/status/statusor.h"
#include "data/dataset.h"

namespace pstrain {
namespace data {

struct IdxOptions {
  // Labels must lie in [0, num_classes); it becomes Dataset::num_classes.
  int num_classes = 10;
};

absl::StatusOr<Dataset> ReadIdx(const std::string& images_path,
                                const std::string& labels_path,
                                const IdxOptions& options = IdxOptions());

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_IDX_READER_H_

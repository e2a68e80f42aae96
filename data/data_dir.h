// The training and test sets of a data directory (the `--data_dir` of the
// chief and the workers), in one of two layouts:
//   - CSV: `train.csv` and `test.csv`, one example per line, numeric
//     features then an integer label in the last field, no header line
//     (csv_reader.h; either may be gzip-compressed under the same name);
//   - IDX (Fashion-MNIST, MNIST): {train,t10k}-{images-idx3,labels-idx1}-
//     ubyte.gz (idx_reader.h).
// A directory holding `train.csv` is read as CSV, any other as IDX.
//
//   PSTRAIN_ASSIGN_OR_RETURN(Dataset train, ReadDataDir(dir, Split::kTrain));
#ifndef PSTRAIN_DATA_DATA_DIR_H_
#define PSTRAIN_DATA_DATA_DIR_H_

#include <string>

#include "absl/status/statusor.h"
#include "data/dataset.h"

namespace pstrain {
namespace data {

enum class Split { kTrain, kTest };

// The `split` of `dir`. Errors are the readers' (they name the file).
absl::StatusOr<Dataset> ReadDataDir(const std::string& dir, Split split);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_DATA_DIR_H_

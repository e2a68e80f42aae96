// The Criteo-format files of a data directory (`--data_dir` with
// `--data_format=criteo`): the training set is every `train*.tsv` and
// `train*.tsv.gz` in it, the test set every `test*.tsv` and `test*.tsv.gz`,
// one or many files each, read in byte order of their names (so
// train-00000.tsv.gz, train-00001.tsv.gz, ... are read in turn). Whether a
// file is compressed is told by its bytes (line_reader.h), not its name.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> train,
//                            ListCriteoFiles(dir, "train"));
#ifndef PSTRAIN_DATA_CRITEO_FILES_H_
#define PSTRAIN_DATA_CRITEO_FILES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace data {

// The paths (dir + "/" + name) of the regular files (or links to them) of
// `dir` named `prefix`*.tsv or `prefix`*.tsv.gz, sorted. NOT_FOUND naming
// the directory and the patterns when there are none, or the errno's code
// when `dir` cannot be read.
absl::StatusOr<std::vector<std::string>> ListCriteoFiles(
    const std::string& dir, absl::string_view prefix);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_CRITEO_FILES_H_

// The Criteo-format files of a data directory (`--data_dir` with
// `--data_format=criteo`). By default the training set is every
// `train*.tsv` and `train*.tsv.gz` in it, the test set every `test*.tsv`
// and `test*.tsv.gz`; the chief's --train_files and --test_files give other
// names as comma-separated glob patterns (fnmatch: `*`, `?`, `[...]`), so
// that a download is read as it lies, e.g. the Terabyte set's days 0 to 22
// for training and day 23 for testing:
//   --train_files='day_?.gz,day_1?.gz,day_2[0-2].gz' --test_files=day_23.gz
// A split is one file or many, read in natural order of their names (runs
// of digits compared as numbers: day_2 before day_10; train-00000.tsv.gz,
// train-00001.tsv.gz, ... in turn). Whether a file is compressed is told by
// its bytes (line_reader.h), not its name.
//
//   PSTRAIN_ASSIGN_OR_RETURN(
//       std::vector<std::string> train,
//       ListCriteoFiles(dir, CriteoPatternsOr(config.train_files(), "train")));
#ifndef PSTRAIN_DATA_CRITEO_FILES_H_
#define PSTRAIN_DATA_CRITEO_FILES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pstrain {
namespace data {

// `split`*.tsv and `split`*.tsv.gz.
std::vector<std::string> DefaultCriteoPatterns(absl::string_view split);

// `given` (any container of strings: a flag's, a config's), or
// DefaultCriteoPatterns(split) when it is empty.
template <typename Strings>
std::vector<std::string> CriteoPatternsOr(const Strings& given,
                                          absl::string_view split) {
  if (given.empty()) return DefaultCriteoPatterns(split);
  return std::vector<std::string>(given.begin(), given.end());
}

// OK if every pattern is a non-empty name pattern (no '/': files are
// matched in the data directory itself); else INVALID_ARGUMENT naming
// `flag` and the pattern.
absl::Status CheckCriteoPatterns(absl::Span<const std::string> patterns,
                                 absl::string_view flag);

// Whether name `a` sorts before `b` in natural order.
bool NaturalLess(absl::string_view a, absl::string_view b);

// The paths (dir + "/" + name) of the regular files (or links to them) of
// `dir` whose names match any of `patterns`, in natural order. NOT_FOUND
// naming the directory and the patterns when there are none, or the errno's
// code when `dir` cannot be read.
absl::StatusOr<std::vector<std::string>> ListCriteoFiles(
    const std::string& dir, absl::Span<const std::string> patterns);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_CRITEO_FILES_H_

// The layout map of a tensor-parallel run, after Keras's LayoutMap: which
// dimensions of which variables the mesh's `model` axis splits. The
// --layout_map file is a JSON object from regular expressions over
// variable paths ("layer/weight") to one entry per dimension, the mesh axis
// that splits it or null, in Keras's form:
//
//   {"d1/kernel": [null, "model"], "d1/bias": ["model"]}
//
//   PSTRAIN_ASSIGN_OR_RETURN(LayoutMap map, LayoutMap::Parse(json_text));
//   PSTRAIN_ASSIGN_OR_RETURN(VariableSplits splits,
//                            map.Resolve(spec.variables, mesh.model));
//
// A key (common/pattern.h) matches a path it matches whole; the
// first key in the file's order that matches wins; a variable no key
// matches is replicated (every member holds all of it), and so is a layout
// of nulls only. A layout may be shorter than the variable's rank (the
// dimensions after it are not split). Immutable after Parse: safe for
// concurrent use.
#ifndef PSTRAIN_PARALLEL_LAYOUT_MAP_H_
#define PSTRAIN_PARALLEL_LAYOUT_MAP_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/training.pb.h"
#include "re2/re2.h"

namespace pstrain {
namespace parallel {

// How the model axis splits one variable among a group's M members.
struct VariableSplit {
  std::vector<int64_t> shape;  // the whole variable's
  // The dimension the model axis splits, or -1 (replicated).
  int split_dim = -1;
  bool split() const { return split_dim >= 0; }
};

// Every variable of a model by path ("d1/kernel").
using VariableSplits = std::map<std::string, VariableSplit>;

// The text of the --layout_map file at `path`; the OS's error naming it
// when it cannot be read (NOT_FOUND when absent), FAILED_PRECONDITION past
// 16 MiB (common/read_file.h).
absl::StatusOr<std::string> ReadLayoutMapFile(const std::string& path);

class LayoutMap {
 public:
  // INVALID_ARGUMENT, starting "layout_map: " and naming the key, for text
  // that is not a JSON object, a key that is not a valid regular
  // expression, a layout that is not an array of null and axis names, an
  // axis other than "model" ("data" splits batches, not variables), or the
  // model axis named twice in one layout.
  static absl::StatusOr<LayoutMap> Parse(absl::string_view json);
  // Parse of the file at `path` (the --layout_map flag); a file that cannot
  // be read gives ReadLayoutMapFile's error, and Parse's errors name it too.
  static absl::StatusOr<LayoutMap> Load(const std::string& path);

  // The split of each of `variables` in a group of `model_size` members.
  // INVALID_ARGUMENT naming the variable and the key that matched it for a
  // layout longer than the variable's rank, or a split dimension that
  // `model_size` does not divide.
  absl::StatusOr<VariableSplits> Resolve(
      const std::vector<VariableDef>& variables, int model_size) const;

  // The key that matches `path` first, or nullopt (replicated).
  std::optional<std::string> MatchingKey(const std::string& path) const;

  int size() const { return static_cast<int>(rules_.size()); }

 private:
  struct Rule {
    std::string key;
    std::shared_ptr<const re2::RE2> regex;
    // The dimension the model axis splits, -1 for none; the layout's length.
    int split_dim = -1;
    int rank = 0;
  };

  const Rule* Match(const std::string& path) const;

  std::vector<Rule> rules_;
};

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_LAYOUT_MAP_H_

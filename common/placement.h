// Variable placement: which ps task holds which variable, or which rows of it.
//
// The chief, every ps task and every worker compute the placement themselves
// from the run's variables and the number of ps tasks, so the result depends
// only on that input: not on the order of `variables`, not on hash-map order,
// and never on randomness.
//
//   PlacementOptions options;
//   options.num_ps = 4;
//   options.rules = {{"embedding/embeddings", 4}, {".*bias", 1}};
//   absl::StatusOr<Placement> placement = ComputePlacement(variables, options);
//   // The ps task holding row 1234 of the first variable:
//   const VariablePlacement& v = placement->variables(0);
//   absl::StatusOr<int> slice = SliceForRow(v, 1234);
//   int ps_task = v.slices(*slice).ps_task();
//
// How each variable is split:
//   - an embedding table that grows on first touch (VariableDef.sparse and
//     shape[0] == 0) is ROW_HASH over all ps tasks (or a rule's num_shards):
//     slice i on ps task i. Its size is unknown, so it does not count towards
//     the byte balance below;
//   - any other variable is WHOLE or ROW_RANGES: K contiguous row ranges on K
//     distinct ps tasks, the first rows % K ranges one row longer than the
//     rest (TensorFlow's fixed_size_partitioner). K comes from the rule the
//     variable's name selects, or, with no rule or num_shards 0, is
//     min(num_ps, rows) for a variable larger than split_threshold_bytes and 1
//     otherwise. A scalar or one-row variable is always WHOLE.
//
// Where the pieces go (bytes balanced, largest first): split variables first,
// largest first (ties by name), each slice onto the least-loaded ps tasks
// (larger slices onto less-loaded tasks, ties to the lowest index); then the
// whole variables by LPT greedy, largest first (ties by name), each onto the
// least-loaded task (ties to the lowest index). This keeps the difference
// between the most- and least-loaded task within the largest single piece.
//
// All functions here are pure and thread-safe.
#ifndef PSTRAIN_COMMON_PLACEMENT_H_
#define PSTRAIN_COMMON_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/training.pb.h"

namespace pstrain {

// How to split the variables a pattern selects. A variable's name selects
// the rule whose pattern equals it exactly; failing that, the first rule whose
// pattern (common/pattern.h) matches anywhere in the name. This is Keras's
// LayoutMap lookup.
struct PlacementRule {
  std::string pattern;
  // 1: keep whole. K > 1: split into min(K, num_ps, rows) row ranges (a
  // growing embedding table: min(K, num_ps) hash buckets). 0: split by size,
  // as for a variable no rule selects.
  int num_shards = 0;
};

struct PlacementOptions {
  // Number of ps tasks, >= 1.
  int num_ps = 1;
  // A variable with no rule that is larger than this many bytes is split
  // across min(num_ps, rows) ps tasks; at or below it stays whole. >= 0.
  int64_t split_threshold_bytes = int64_t{1} << 20;
  // Tried as described at PlacementRule.
  std::vector<PlacementRule> rules;
};

// The placement of `variables` on options.num_ps ps tasks, with num_ps set and
// one entry per variable, sorted by name. INVALID_ARGUMENT, naming the
// variable or rule, for: num_ps < 1, a negative split_threshold_bytes, an
// empty or duplicate name, an invalid dtype, a negative dimension, a variable
// (or all of them together) over 2^62 bytes, a sparse scalar, an invalid
// pattern or a negative num_shards in a rule.
absl::StatusOr<Placement> ComputePlacement(
    absl::Span<const VariableDef> variables, const PlacementOptions& options);

// The index in `placement.slices()` of the slice holding row `row`: row mod
// the number of slices for ROW_HASH, the range containing `row` for WHOLE and
// ROW_RANGES (a scalar is one row, row 0). OUT_OF_RANGE naming the variable
// and row if `row` is negative or beyond the variable's rows; INVALID_ARGUMENT
// if `placement` has no slices or no partitioning.
absl::StatusOr<int> SliceForRow(const VariablePlacement& placement,
                                int64_t row);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_PLACEMENT_H_

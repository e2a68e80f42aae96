// The tensor-parallel form of a model for one member of a model-parallel
// group, derived from the layout map's splits as Megatron-style tensor
// parallelism does (Paddle's ColumnParallelLinear / RowParallelLinear):
//
//   column-parallel Dense  kernel [in, out] split on `out` (and its bias on
//                          its only dimension): the member computes its
//                          columns of the output, a slice [batch, out / M].
//   row-parallel Dense     kernel split on `in`: the member multiplies its
//                          slice of the input by its rows of the kernel and
//                          an all-reduce sums the M partial outputs; the
//                          bias (replicated) is added once, after the sum.
//   replicated             every member computes the whole layer.
//
// A split activation stays split through elementwise layers (an Activation
// other than softmax, Dropout) and is gathered only where a layer needs the
// whole: a column-parallel layer followed by a row-parallel one exchanges
// nothing between them (an MLP block costs one all-reduce forward and one
// backward). The backward mirrors it: a column-parallel layer whose input's
// gradient is needed all-reduces its partial dx; a gather's backward takes
// the member's columns of the gradient; a row-parallel layer that sliced a
// whole input all-gathers its dx.
//
//   PSTRAIN_ASSIGN_OR_RETURN(TensorParallelPlan plan,
//       PlanTensorParallel(spec, splits, mesh.model, at.model));
//   plan.layers[i].form, plan.variables.at("d1/kernel").begin ...
//
// This version splits Dense layers on a rank-1 input in a chain of layers
// (each reads the one before it); a layout that splits anything else is
// refused before the run, naming the layer or variable and why.
#ifndef PSTRAIN_PARALLEL_TENSOR_PARALLEL_PLAN_H_
#define PSTRAIN_PARALLEL_TENSOR_PARALLEL_PLAN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_spec.h"
#include "parallel/layout_map.h"

namespace pstrain {
namespace parallel {

enum class ParallelForm { kReplicated, kColumnParallel, kRowParallel };

// "replicated", "column-parallel", "row-parallel".
const char* ParallelFormName(ParallelForm form);

// What one layer of the model does on a member.
struct ParallelLayer {
  ParallelForm form = ParallelForm::kReplicated;
  // Its input arrives as the member's column slice [batch, width / M]
  // (from a column-parallel layer, through elementwise layers).
  bool input_split = false;
  // An all-gather assembles the whole input first (the input arrived split
  // but the layer needs the whole); its backward takes the member's columns.
  bool gather_input = false;
  // Row-parallel on a whole input: the member takes its columns of it, and
  // its backward all-gathers dx.
  bool slice_input = false;
  // Its output is the member's column slice.
  bool output_split = false;
  // Row-parallel: an all-reduce sums the partial outputs (before the bias).
  bool reduce_output = false;
  // Column-parallel whose input gradient is needed: an all-reduce sums the
  // members' partial dx.
  bool reduce_input_gradient = false;
  // Some earlier layer has variables, so dx is computed.
  bool needs_input_gradient = false;
};

// The part of one variable a member holds: the whole, or the range
// [begin, end) of dimension split_dim.
struct MemberVariable {
  std::vector<int64_t> shape;        // the whole variable's
  std::vector<int64_t> local_shape;  // the member's part
  int split_dim = -1;
  int64_t begin = 0;
  int64_t end = 0;
  bool split() const { return split_dim >= 0; }
  int64_t local_elements() const;
};

struct TensorParallelPlan {
  int model_size = 1;
  int member = 0;
  std::vector<ParallelLayer> layers;  // one per ModelSpec::layers entry
  // The model's output arrives split: an all-gather assembles it.
  bool gather_output = false;
  std::map<std::string, MemberVariable> variables;
  // Collectives a training step runs, and the floats each moves per example
  // (an all-reduce counts its whole buffer, an all-gather its whole result).
  int forward_collectives = 0;
  int backward_collectives = 0;
  int64_t floats_per_example = 0;
};

// The plan of member `member` (in [0, model_size)) for `spec` with the
// layout map's `splits` (LayoutMap::Resolve with the same model_size).
// INVALID_ARGUMENT naming the layer or variable for what this version cannot
// split: a split variable of a layer other than Dense, a shared Dense, a
// Dense on an input of rank above 1, a bias split differently from its
// kernel's output, a kernel split on its input with a split bias, a
// softmax applied to a split output, or a model that is not a chain when
// anything is split.
absl::StatusOr<TensorParallelPlan> PlanTensorParallel(
    const worker::ModelSpec& spec, const VariableSplits& splits,
    int model_size, int member);

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_TENSOR_PARALLEL_PLAN_H_

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
//   head-parallel MHA      MultiHeadAttention with query/key/value kernels
//                          [d, heads, dim] split on `heads` (their biases
//                          [heads, dim] on `heads`) and the output kernel
//                          [heads, dim, d] on `heads`: the member computes
//                          its heads, an all-reduce sums the output
//                          projection's partial outputs and the (replicated)
//                          output bias is added once.
//   vocab-parallel         Embedding with embeddings [vocab, dim] split on
//   Embedding              `vocab` (Paddle's VocabParallelEmbedding): the
//                          member looks up the ids in its rows, zeros for
//                          the others, and an all-reduce sums the rows.
//
// The model is a layer graph (residual branches included). Dense acts on
// the last axis of an input of any rank, so a split activation is split on
// its last axis. Layers other than these are replicated; a replicated layer
// with one input that reads a split activation gathers it first.
//
// A layout this version cannot execute is refused before the run, naming
// the layer or variable and why: a split variable of another layer kind, a
// shared (twice-called) split layer, a split the layer's form does not
// allow (e.g. an Embedding split on its output dimension, one attention
// kernel split but not the others), a softmax applied to a split output, a
// layer of several inputs reading a split activation, or a Flatten/Reshape
// of a split activation of rank above 1.
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

enum class ParallelForm {
  kReplicated,
  kColumnParallel,
  kRowParallel,
  kHeadParallel,   // MultiHeadAttention split by heads
  kVocabParallel,  // Embedding split by vocabulary (rows)
};

// "replicated", "column-parallel", "row-parallel", "head-parallel",
// "vocab-parallel".
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
  // Row-, head- and vocab-parallel: an all-reduce sums the partial outputs
  // (before the bias, which is added once).
  bool reduce_output = false;
  // Column- or head-parallel whose input gradient is needed: an all-reduce
  // sums the members' partial dx (of each input).
  bool reduce_input_gradient = false;
  // Some layer before it (on a path to it) has variables, so dx is
  // computed.
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
// split (see the list above): a split variable of a layer other than Dense,
// MultiHeadAttention or Embedding, a shared split layer, a bias split
// differently from its kernel's output, a kernel split on its input with a
// split bias, attention variables not all split by heads (the output bias
// replicated), an Embedding split on its output dimension, a softmax
// applied to a split output, a layer of several inputs reading a split
// activation, or a Flatten/Reshape of a split activation of rank above 1.
absl::StatusOr<TensorParallelPlan> PlanTensorParallel(
    const worker::ModelSpec& spec, const VariableSplits& splits,
    int model_size, int member);

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_TENSOR_PARALLEL_PLAN_H_

// The model one member of a tensor-parallel group computes: the whole
// model's layers with the member's parts of the split ones, in the shapes
// each layer's op sees on the member (tensor_parallel_plan.h), so that the
// CPU's layer planner (compute/layer_plan.h) plans the member's ops:
//
//   column-parallel Dense  units / M, its output's last axis / M
//   row-parallel Dense     its input's last axis / M
//   head-parallel MHA      num_heads / M
//   vocab-parallel         input_dim / M
//   Embedding
//   a layer on a split     its input's and output's last axes / M
//   activation that keeps
//   it split
//
// and every variable in its MemberVariable::local_shape. A layer that
// gathers its input keeps the whole input shape.
//
//   PSTRAIN_ASSIGN_OR_RETURN(ModelSpec local, MemberModelSpec(spec, plan));
#ifndef PSTRAIN_PARALLEL_MEMBER_MODEL_H_
#define PSTRAIN_PARALLEL_MEMBER_MODEL_H_

#include "absl/status/statusor.h"
#include "model/model_spec.h"
#include "parallel/tensor_parallel_plan.h"

namespace pstrain {
namespace parallel {

// INVALID_ARGUMENT if `plan` is not `spec`'s (its layers or variables).
absl::StatusOr<worker::ModelSpec> MemberModelSpec(
    const worker::ModelSpec& spec, const TensorParallelPlan& plan);

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_MEMBER_MODEL_H_

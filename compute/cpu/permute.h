// Keras Permute: a per-example transpose of [batch, d1, ..., dk] by a
// permutation of the k non-batch axes, forward and backward, as oneDNN
// reorders (a strided view of the source copied into a dense destination).
//
// Keras's dims are 1-based and name, for each output axis, the input axis it
// takes (Permute((2, 1)) swaps the two axes of [b, d1, d2]):
//   out_dims[i] = in_dims[dims[i] - 1]
//   y[n, j_1, ..., j_k] = x[n, i_1, ..., i_k]  where i_{dims[a]} = j_a
// Backward applies the inverse permutation: dx = dy transposed back to
// [batch, in_dims]. Both are pure copies (no arithmetic).
//
//   PermuteShape shape;
//   shape.batch = 32;
//   shape.in_dims = {10, 64};   // [b, 10, 64] ...
//   shape.dims = {2, 1};        // ... -> [b, 64, 10]
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PermuteOp> permute,
//                            PermuteOp::Create(shape, engine));
//   PSTRAIN_RETURN_IF_ERROR(permute->Forward(x, y));
//   PSTRAIN_RETURN_IF_ERROR(permute->Backward(dy, dx));
//
// Not thread-safe; see Engine.
#ifndef PSTRAIN_COMPUTE_CPU_PERMUTE_H_
#define PSTRAIN_COMPUTE_CPU_PERMUTE_H_

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/engine.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

struct PermuteShape {
  int64_t batch = 0;
  std::vector<int64_t> in_dims;  // d1..dk, the batch axis excluded.
  std::vector<int> dims;         // Keras's: a permutation of 1..k.
};

class PermuteOp {
 public:
  // INVALID_ARGUMENT for a non-positive size, no axes or more than 11
  // (oneDNN's limit of 12 with the batch), or dims that are not a
  // permutation of 1..k; a oneDNN failure as a status naming Permute.
  static absl::StatusOr<std::unique_ptr<PermuteOp>> Create(
      const PermuteShape& shape, Engine* engine);

  PermuteOp(const PermuteOp&) = delete;
  PermuteOp& operator=(const PermuteOp&) = delete;

  const PermuteShape& shape() const { return shape_; }
  // The output's non-batch axes: out_dims()[i] = in_dims[dims[i] - 1].
  const std::vector<int64_t>& out_dims() const { return out_dims_; }

  // x: [batch, in_dims...]; y: [batch, out_dims...]. x and y must not
  // overlap.
  absl::Status Forward(const float* x, float* y);

  // dx [batch, in_dims...] (overwritten) from dy [batch, out_dims...].
  absl::Status Backward(const float* dy, float* dx);

 private:
  PermuteOp(const PermuteShape& shape, std::vector<int64_t> out_dims,
            Engine* engine)
      : shape_(shape), out_dims_(std::move(out_dims)), engine_(engine) {}

  absl::Status Init();

  const PermuteShape shape_;
  const std::vector<int64_t> out_dims_;
  Engine* const engine_;

  dnnl::memory x_mem_, y_mem_, dy_mem_, dx_mem_;
  dnnl::reorder fwd_;
  std::unordered_map<int, dnnl::memory> fwd_args_;
  dnnl::reorder bwd_;
  std::unordered_map<int, dnnl::memory> bwd_args_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_PERMUTE_H_

// The parameters of graph_kernels.h's kernels for a layer's stage, made on
// the host from the shapes the plan gives (compute/layer_plan.h): what a
// GPU GraphStage (graph_stage.h) hands its kernels. Plain functions, so
// that the index arithmetic they set up is tested without a GPU
// (stage_geometry_test against the CPU ops' layouts).
//
//   PermuteGeometry forward = TransposeGeometry(in_dims, permutation);
//   PermuteGeometry backward = InverseTransposeGeometry(in_dims, permutation);
//   PSTRAIN_ASSIGN_OR_RETURN(AvgPoolGeometry g,
//                            AvgPoolGeometryOf(plan.pool, batch));
#ifndef PSTRAIN_COMPUTE_GPU_STAGE_GEOMETRY_H_
#define PSTRAIN_COMPUTE_GPU_STAGE_GEOMETRY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compute/cpu/op_shapes.h"
#include "compute/gpu/graph_kernels.h"
#include "compute/gpu/kernel_math.h"
#include "model/model_spec.h"

namespace pstrain {
namespace worker {
namespace gpu {

// The elementwise kernel's parameters for `shape`'s activation;
// INVALID_ARGUMENT for one that is not elementwise (linear, relu, softmax,
// log_softmax: the planner makes no such kActivation stage but the last
// two, which run along an axis).
absl::StatusOr<PointwiseParams> PointwiseParamsOf(
    const cpu::ActivationShape& shape);

MergeKind MergeKindOf(MergeOp op);

// Keras's Permute of an example of `dims` (at most kMaxPermuteRank axes):
// output axis a is input axis order[a] (0-based). The inverse takes the
// permuted example back to `dims` (its backward).
PermuteGeometry TransposeGeometry(const std::vector<int64_t>& dims,
                                  const std::vector<int>& order);
PermuteGeometry InverseTransposeGeometry(const std::vector<int64_t>& dims,
                                         const std::vector<int>& order);

// ZeroPadding2D of an example [height, width, channels] (`in_shape`).
PadGeometry ZeroPaddingGeometry(const std::vector<int64_t>& in_shape, int top,
                                int bottom, int left, int right);

// AveragePooling2D of `batch` examples of `shape` (its batch ignored), with
// Keras's output sizes and padding (compute/cpu/window.h); its errors.
absl::StatusOr<AvgPoolGeometry> AvgPoolGeometryOf(const cpu::Pool2DShape& shape,
                                                  int64_t batch);

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_STAGE_GEOMETRY_H_

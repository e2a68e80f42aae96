#include "compute/gpu/stage_geometry.h"

#include "common/status_macros.h"
#include "compute/cpu/window.h"

namespace pstrain {
namespace worker {
namespace gpu {

absl::StatusOr<PointwiseParams> PointwiseParamsOf(
    const cpu::ActivationShape& shape) {
  PointwiseParams p;
  p.max_value = shape.params.max_value;
  p.negative_slope = shape.params.negative_slope;
  p.threshold = shape.params.threshold;
  p.alpha = shape.params.alpha;
  switch (shape.activation) {
    case Activation::kKerasRelu:
      p.kind = PointwiseActivation::kKerasRelu;
      return p;
    case Activation::kGelu:
      p.kind = PointwiseActivation::kGelu;
      return p;
    case Activation::kGeluTanh:
      p.kind = PointwiseActivation::kGeluTanh;
      return p;
    case Activation::kSigmoid:
      p.kind = PointwiseActivation::kSigmoid;
      return p;
    case Activation::kHardSigmoid:
      p.kind = PointwiseActivation::kHardSigmoid;
      return p;
    case Activation::kTanh:
      p.kind = PointwiseActivation::kTanh;
      return p;
    case Activation::kSilu:
      p.kind = PointwiseActivation::kSilu;
      return p;
    case Activation::kElu:
      p.kind = PointwiseActivation::kElu;
      return p;
    case Activation::kSelu:
      p.kind = PointwiseActivation::kSelu;
      return p;
    case Activation::kSoftplus:
      p.kind = PointwiseActivation::kSoftplus;
      return p;
    case Activation::kLinear:
    case Activation::kRelu:
    case Activation::kSoftmax:
    case Activation::kLogSoftmax:
      break;
  }
  return absl::InvalidArgumentError(
      "linear, relu, softmax and log_softmax are not elementwise kernels");
}

MergeKind MergeKindOf(MergeOp op) {
  switch (op) {
    case MergeOp::kAdd:
      return MergeKind::kAdd;
    case MergeOp::kSubtract:
      return MergeKind::kSubtract;
    case MergeOp::kMultiply:
      return MergeKind::kMultiply;
    case MergeOp::kAverage:
      return MergeKind::kAverage;
    case MergeOp::kMaximum:
      return MergeKind::kMaximum;
    case MergeOp::kMinimum:
      return MergeKind::kMinimum;
  }
  return MergeKind::kAdd;
}

PermuteGeometry TransposeGeometry(const std::vector<int64_t>& dims,
                                  const std::vector<int>& order) {
  const int rank = static_cast<int>(dims.size());
  std::vector<int64_t> strides(rank, 1);
  for (int i = rank - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  PermuteGeometry g;
  g.rank = rank;
  g.per_example = 1;
  for (int a = 0; a < rank; ++a) {
    g.out_dims[a] = dims[order[a]];
    g.in_strides[a] = strides[order[a]];
    g.per_example *= dims[a];
  }
  return g;
}

PermuteGeometry InverseTransposeGeometry(const std::vector<int64_t>& dims,
                                         const std::vector<int>& order) {
  std::vector<int64_t> out_dims;
  std::vector<int> inverse(dims.size());
  for (size_t a = 0; a < dims.size(); ++a) {
    out_dims.push_back(dims[order[a]]);
    inverse[order[a]] = static_cast<int>(a);
  }
  return TransposeGeometry(out_dims, inverse);
}

PadGeometry ZeroPaddingGeometry(const std::vector<int64_t>& in_shape, int top,
                                int bottom, int left, int right) {
  PadGeometry g{};
  g.height = in_shape[0];
  g.width = in_shape[1];
  g.channels = in_shape[2];
  g.top = top;
  g.left = left;
  g.padded_height = in_shape[0] + top + bottom;
  g.padded_width = in_shape[1] + left + right;
  return g;
}

absl::StatusOr<AvgPoolGeometry> AvgPoolGeometryOf(const cpu::Pool2DShape& s,
                                                  int64_t batch) {
  PSTRAIN_ASSIGN_OR_RETURN(
      const cpu::Window h,
      cpu::KerasWindow(s.height, s.pool_h, s.stride_h, s.padding));
  PSTRAIN_ASSIGN_OR_RETURN(
      const cpu::Window w,
      cpu::KerasWindow(s.width, s.pool_w, s.stride_w, s.padding));
  AvgPoolGeometry g;
  g.batch = batch;
  g.height = s.height;
  g.width = s.width;
  g.channels = s.channels;
  g.out_height = h.output;
  g.out_width = w.output;
  g.pool_h = s.pool_h;
  g.pool_w = s.pool_w;
  g.stride_h = s.stride_h;
  g.stride_w = s.stride_w;
  g.pad_top = h.pad_before;
  g.pad_left = w.pad_before;
  return g;
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

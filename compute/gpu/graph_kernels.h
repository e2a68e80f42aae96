// The CUDA kernels of the GPU graph stages (graph_stage.h) that cuDNN and
// cuBLAS have nothing for: Keras's activations other than ReLU and
// last-axis softmax, the merge layers, Rescaling, Permute, AveragePooling2D
// with Keras's (possibly asymmetric) "same" padding, the global poolings,
// and the elementwise sum the graph executor accumulates gradients with.
// Each is the twin of a CPU op and follows its arithmetic and tie rules
// (named at each function).
//
// Plain C++ (compiled by nvcc, so no Abseil), as kernels.h: each Launch*
// function enqueues one kernel on `stream` and returns the launch error;
// errors while it runs surface at the next synchronization. All pointers
// are device pointers. Only graph_stage.cc (and the tests) call these.
#ifndef PSTRAIN_COMPUTE_GPU_GRAPH_KERNELS_H_
#define PSTRAIN_COMPUTE_GPU_GRAPH_KERNELS_H_

#include <cuda_runtime.h>
#include <stdint.h>

namespace pstrain {
namespace worker {
namespace gpu {

// sum[i] += add[i] for i < n.
cudaError_t LaunchAccumulate(const float* add, int64_t n, float* sum,
                             cudaStream_t stream);

// y[i] = x[i] * scale + offset for i < n (Rescaling; its backward is
// scale = the layer's, offset = 0). x == y allowed.
cudaError_t LaunchScaleShift(const float* x, int64_t n, float scale,
                             float offset, float* y, cudaStream_t stream);

// The elementwise activations of compute/cpu/activation.cc, with its
// formulas (Keras 3's) and its derivative at a kink (the side below).
enum class PointwiseActivation {
  kKerasRelu,  // max_value (0: none), negative_slope, threshold.
  kGelu,
  kGeluTanh,
  kSigmoid,
  kHardSigmoid,  // clip(alpha * x + 0.5, 0, 1).
  kTanh,
  kSilu,
  kElu,  // alpha.
  kSelu,
  kSoftplus,
};

struct PointwiseParams {
  PointwiseActivation kind = PointwiseActivation::kTanh;
  float max_value = 0;
  float negative_slope = 0;
  float threshold = 0;
  float alpha = 1;
};

// y = f(x) over n elements; x == y allowed.
cudaError_t LaunchPointwiseForward(const PointwiseParams& params,
                                   const float* x, int64_t n, float* y,
                                   cudaStream_t stream);

// dx = dy * f'(x), from the forward's x and y; dy == dx allowed.
cudaError_t LaunchPointwiseBackward(const PointwiseParams& params,
                                    const float* x, const float* y,
                                    const float* dy, int64_t n, float* dx,
                                    cudaStream_t stream);

// Softmax (log_softmax with `log`) along the middle axis of
// [outer, axis, inner], the maximum subtracted and the sum in double, as
// the CPU's ActivationOp.
cudaError_t LaunchAxisSoftmaxForward(const float* x, int64_t outer,
                                     int64_t axis, int64_t inner, bool log,
                                     float* y, cudaStream_t stream);

// Its backward from y: softmax dx = y (dy - sum(dy y)); log_softmax
// dx = dy - exp(y) sum(dy).
cudaError_t LaunchAxisSoftmaxBackward(const float* y, const float* dy,
                                      int64_t outer, int64_t axis,
                                      int64_t inner, bool log, float* dx,
                                      cudaStream_t stream);

// The merge layers' inputs, passed by value to the kernels.
constexpr int kMaxMergeInputs = 16;
enum class MergeKind {
  kAdd,
  kSubtract,
  kMultiply,
  kAverage,
  kMaximum,
  kMinimum
};
struct MergeInputs {
  const float* x[kMaxMergeInputs] = {};
  int count = 0;
};

// y = op(x[0], x[1], ...) elementwise over n elements each, folded left to
// right as compute/cpu/merge.cc does.
cudaError_t LaunchMergeForward(MergeKind op, const MergeInputs& inputs,
                               int64_t n, float* y, cudaStream_t stream);

// dx = d(sum(dy * y)) / d(x[which]); Maximum and Minimum pass the gradient
// to the first input holding the extreme value, as the CPU.
cudaError_t LaunchMergeBackward(MergeKind op, const MergeInputs& inputs,
                                const float* dy, int64_t n, int which,
                                float* dx, cudaStream_t stream);

// A per-example transpose: the output's axis a (of `rank`) has out_dims[a]
// elements and steps in_strides[a] elements through the input example.
constexpr int kMaxPermuteRank = 8;
struct PermuteGeometry {
  int rank = 0;
  int64_t out_dims[kMaxPermuteRank] = {};
  int64_t in_strides[kMaxPermuteRank] = {};
  int64_t per_example = 0;  // Elements of one example.
};

// y[b, j_0, ..., j_{rank-1}] = x[b, sum_a j_a * in_strides[a]] for `batch`
// examples.
cudaError_t LaunchPermute(const float* x, int64_t batch,
                          const PermuteGeometry& g, float* y,
                          cudaStream_t stream);

// AveragePooling2D over NHWC: each output the mean of the input elements
// its window covers, padding never counted (the CPU's
// pooling_avg_exclude_padding), with Keras's pad_top / pad_left before.
struct AvgPoolGeometry {
  int64_t batch = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
  int64_t out_height = 0;
  int64_t out_width = 0;
  int64_t pool_h = 0;
  int64_t pool_w = 0;
  int64_t stride_h = 0;
  int64_t stride_w = 0;
  int64_t pad_top = 0;
  int64_t pad_left = 0;
};

cudaError_t LaunchAvgPoolForward(const float* x, const AvgPoolGeometry& g,
                                 float* y, cudaStream_t stream);

// dx (overwritten): each input element the sum over the windows covering
// it of dy / (that window's count).
cudaError_t LaunchAvgPoolBackward(const float* dy, const AvgPoolGeometry& g,
                                  float* dx, cudaStream_t stream);

// Global pooling of x [batch, steps, channels] to y [batch, channels]:
// the mean (summed in double) or the maximum.
cudaError_t LaunchGlobalPoolForward(const float* x, int64_t batch,
                                    int64_t steps, int64_t channels, bool max,
                                    float* y, cudaStream_t stream);

// dx [batch, steps, channels] (overwritten): the mean's dy / steps at every
// step; the maximum's dy at the first step whose x equals y (the CPU's
// first maximum), 0 elsewhere.
cudaError_t LaunchGlobalPoolBackward(const float* x, const float* y,
                                     const float* dy, int64_t batch,
                                     int64_t steps, int64_t channels, bool max,
                                     float* dx, cudaStream_t stream);

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_GRAPH_KERNELS_H_

#include "compute/gpu/conv2d.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/conv2d_geometry.h"
#include "compute/gpu/kernels.h"
#include "compute/gpu/shape_check.h"
#include "compute/weighted_op_checks.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr char kOp[] = "Conv2D";

// Picks from cuDNN's heuristic ranking (best first) the first result that
// succeeded, uses FP32 FMA math and whose workspace (asked for exactly with
// `workspace_size`, as the ranking's estimate can differ) fits in `limit`;
// deterministic results first. `Perf` is one of cuDNN's *AlgoPerf_t.
template <typename Perf, typename WorkspaceSize>
absl::Status Choose(const char* what, const std::vector<Perf>& ranking,
                    size_t limit, WorkspaceSize workspace_size,
                    decltype(Perf::algo)* algo, size_t* bytes) {
  for (const bool deterministic_only : {true, false}) {
    for (const Perf& perf : ranking) {
      if (perf.status != CUDNN_STATUS_SUCCESS) continue;
      if (perf.mathType != CUDNN_FMA_MATH) continue;
      if (deterministic_only && perf.determinism != CUDNN_DETERMINISTIC) {
        continue;
      }
      size_t needed = 0;
      if (!workspace_size(perf.algo, &needed).ok() || needed > limit) continue;
      *algo = perf.algo;
      *bytes = needed;
      return absl::OkStatus();
    }
  }
  return absl::UnimplementedError(
      absl::StrCat(kOp, ": cuDNN offers no FP32 (FMA) ", what,
                   " algorithm for this shape", " within the ", limit,
                   "-byte workspace (", ranking.size(), " candidates)"));
}

}  // namespace

Conv2DOp::Conv2DOp(const Conv2DShape& shape, Device* device,
                   const Conv2DWindows& out)
    : Conv2DOpGeometry(shape, out),
      device_(device),
      extra_top_(std::max<int64_t>(out_h_.pad_before - out_h_.pad_after, 0)),
      extra_left_(std::max<int64_t>(out_w_.pad_before - out_w_.pad_after, 0)),
      extra_h_(std::abs(out_h_.pad_after - out_h_.pad_before)),
      extra_w_(std::abs(out_w_.pad_after - out_w_.pad_before)),
      pad_h_(std::min(out_h_.pad_before, out_h_.pad_after)),
      pad_w_(std::min(out_w_.pad_before, out_w_.pad_after)),
      pads_input_(extra_h_ != 0 || extra_w_ != 0) {}

absl::StatusOr<std::unique_ptr<Conv2DOp>> Conv2DOp::Create(
    const Conv2DShape& shape, Device* device) {
  PSTRAIN_RETURN_IF_ERROR(CheckDims(kOp, cpu::PositiveSizes(shape)));
  PSTRAIN_RETURN_IF_ERROR(CheckConv2DGroups(shape));
  if (shape.fuse_relu) {
    return absl::InvalidArgumentError(
        "Conv2D: fuse_relu is a CPU (oneDNN) option; apply ReluOp after the "
        "GPU convolution");
  }
  PSTRAIN_ASSIGN_OR_RETURN(const Conv2DWindows out, Conv2DOutputWindows(shape));
  const Window& out_h = out.height;
  const Window& out_w = out.width;
  // The input with its asymmetric part of the padding ("same": 0 or 1 after;
  // "causal": extent - 1 before).
  PSTRAIN_RETURN_IF_ERROR(CheckElements(
      kOp, "x",
      {shape.batch, shape.height + std::abs(out_h.pad_after - out_h.pad_before),
       shape.width + std::abs(out_w.pad_after - out_w.pad_before),
       shape.in_channels}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(
      kOp, "y", {shape.batch, out_h.output, out_w.output, shape.out_channels}));
  PSTRAIN_RETURN_IF_ERROR(
      CheckElements(kOp, "w",
                    {shape.kernel_h, shape.kernel_w,
                     shape.in_channels / shape.groups, shape.out_channels}));
  PSTRAIN_RETURN_IF_ERROR(CheckDevice(kOp, device));
  std::unique_ptr<Conv2DOp> op(new Conv2DOp(shape, device, out));
  PSTRAIN_RETURN_IF_ERROR(op->Init());
  return op;
}

absl::Status Conv2DOp::Init() {
  const Conv2DShape& s = shape_;
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  const int64_t in_h = s.height + extra_h_;
  const int64_t in_w = s.width + extra_w_;
  PSTRAIN_ASSIGN_OR_RETURN(x_desc_,
                           NhwcTensor(kOp, s.batch, in_h, in_w, s.in_channels));
  PSTRAIN_ASSIGN_OR_RETURN(y_desc_, NhwcTensor(kOp, s.batch, out_h_.output,
                                               out_w_.output, s.out_channels));
  // With groups, cuDNN's filter is [out, in / groups, kh, kw]: the KRSC
  // transpose of Keras's [kh, kw, in / groups, out].
  PSTRAIN_ASSIGN_OR_RETURN(
      w_desc_, KrscFilter(kOp, s.out_channels, s.in_channels / s.groups,
                          s.kernel_h, s.kernel_w));
  PSTRAIN_ASSIGN_OR_RETURN(conv_desc_, CreateConvolutionDescriptor(kOp));
  // Keras's Conv2D is a cross-correlation. cuDNN pads the symmetric part on
  // both sides; the rest (if any) is already in the input.
  PSTRAIN_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetConvolution2dDescriptor(
          conv_desc_.get(), static_cast<int>(pad_h_), static_cast<int>(pad_w_),
          static_cast<int>(s.stride_h), static_cast<int>(s.stride_w),
          static_cast<int>(s.dilation_h), static_cast<int>(s.dilation_w),
          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
      "Conv2D: cudnnSetConvolution2dDescriptor"));
  if (s.groups != 1) {
    PSTRAIN_RETURN_IF_ERROR(
        CudnnStatus(cudnnSetConvolutionGroupCount(conv_desc_.get(),
                                                  static_cast<int>(s.groups)),
                    "Conv2D: cudnnSetConvolutionGroupCount"));
  }
  // FP32 FMA only: on Ampere and later, CUDNN_DEFAULT_MATH would allow TF32
  // tensor cores (10-bit mantissa), far from the CPU's results.
  PSTRAIN_RETURN_IF_ERROR(
      CudnnStatus(cudnnSetConvolutionMathType(conv_desc_.get(), CUDNN_FMA_MATH),
                  "Conv2D: cudnnSetConvolutionMathType"));

  // cuDNN's idea of the output must be Keras's.
  int n = 0, c = 0, h = 0, w = 0;
  PSTRAIN_RETURN_IF_ERROR(CudnnStatus(
      cudnnGetConvolution2dForwardOutputDim(conv_desc_.get(), x_desc_.get(),
                                            w_desc_.get(), &n, &c, &h, &w),
      "Conv2D: cudnnGetConvolution2dForwardOutputDim"));
  if (n != s.batch || c != s.out_channels || h != out_h_.output ||
      w != out_w_.output) {
    return absl::InternalError(
        absl::StrCat(kOp, ": cuDNN's output [", n, ", ", h, ", ", w, ", ", c,
                     "] differs from Keras's [", s.batch, ", ", out_h_.output,
                     ", ", out_w_.output, ", ", s.out_channels, "]"));
  }
  PSTRAIN_RETURN_IF_ERROR(ChooseAlgorithms());

  const int64_t w_bytes = s.kernel_h * s.kernel_w * (s.in_channels / s.groups) *
                          s.out_channels * int64_t{sizeof(float)};
  PSTRAIN_ASSIGN_OR_RETURN(w_krsc_, device_->Allocate(w_bytes));
  PSTRAIN_ASSIGN_OR_RETURN(dw_krsc_, device_->Allocate(w_bytes));
  if (pads_input_) {
    const int64_t x_bytes =
        s.batch * in_h * in_w * s.in_channels * int64_t{sizeof(float)};
    PSTRAIN_ASSIGN_OR_RETURN(x_padded_, device_->Allocate(x_bytes));
    if (s.compute_dx) {
      PSTRAIN_ASSIGN_OR_RETURN(dx_padded_, device_->Allocate(x_bytes));
    }
  }
  return absl::OkStatus();
}

absl::Status Conv2DOp::ChooseAlgorithms() {
  cudnnHandle_t handle = device_->cudnn();
  const size_t limit = device_->workspace_bytes();
  {
    int max_count = 0;
    PSTRAIN_RETURN_IF_ERROR(CudnnStatus(
        cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count),
        "Conv2D: cudnnGetConvolutionForwardAlgorithmMaxCount"));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> ranking(max_count);
    int returned = 0;
    PSTRAIN_RETURN_IF_ERROR(
        CudnnStatus(cudnnGetConvolutionForwardAlgorithm_v7(
                        handle, x_desc_.get(), w_desc_.get(), conv_desc_.get(),
                        y_desc_.get(), max_count, &returned, ranking.data()),
                    "Conv2D: cudnnGetConvolutionForwardAlgorithm_v7"));
    ranking.resize(returned);
    PSTRAIN_RETURN_IF_ERROR(Choose(
        "forward", ranking, limit,
        [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
          return CudnnStatus(cudnnGetConvolutionForwardWorkspaceSize(
                                 handle, x_desc_.get(), w_desc_.get(),
                                 conv_desc_.get(), y_desc_.get(), algo, bytes),
                             "Conv2D: cudnnGetConvolutionForwardWorkspaceSize");
        },
        &fwd_algo_, &fwd_workspace_));
  }
  if (shape_.compute_dx) {
    int max_count = 0;
    PSTRAIN_RETURN_IF_ERROR(CudnnStatus(
        cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count),
        "Conv2D: cudnnGetConvolutionBackwardDataAlgorithmMaxCount"));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> ranking(max_count);
    int returned = 0;
    PSTRAIN_RETURN_IF_ERROR(
        CudnnStatus(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                        handle, w_desc_.get(), y_desc_.get(), conv_desc_.get(),
                        x_desc_.get(), max_count, &returned, ranking.data()),
                    "Conv2D: cudnnGetConvolutionBackwardDataAlgorithm_v7"));
    ranking.resize(returned);
    PSTRAIN_RETURN_IF_ERROR(Choose(
        "backward-data", ranking, limit,
        [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
          return CudnnStatus(
              cudnnGetConvolutionBackwardDataWorkspaceSize(
                  handle, w_desc_.get(), y_desc_.get(), conv_desc_.get(),
                  x_desc_.get(), algo, bytes),
              "Conv2D: cudnnGetConvolutionBackwardDataWorkspaceSize");
        },
        &bwd_data_algo_, &bwd_data_workspace_));
  }
  int max_count = 0;
  PSTRAIN_RETURN_IF_ERROR(CudnnStatus(
      cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count),
      "Conv2D: cudnnGetConvolutionBackwardFilterAlgorithmMaxCount"));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> ranking(max_count);
  int returned = 0;
  PSTRAIN_RETURN_IF_ERROR(
      CudnnStatus(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                      handle, x_desc_.get(), y_desc_.get(), conv_desc_.get(),
                      w_desc_.get(), max_count, &returned, ranking.data()),
                  "Conv2D: cudnnGetConvolutionBackwardFilterAlgorithm_v7"));
  ranking.resize(returned);
  return Choose(
      "backward-filter", ranking, limit,
      [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
        return CudnnStatus(
            cudnnGetConvolutionBackwardFilterWorkspaceSize(
                handle, x_desc_.get(), y_desc_.get(), conv_desc_.get(),
                w_desc_.get(), algo, bytes),
            "Conv2D: cudnnGetConvolutionBackwardFilterWorkspaceSize");
      },
      &bwd_filter_algo_, &bwd_filter_workspace_);
}

absl::Status Conv2DOp::PrepareWeights(const float* w, uint64_t weights_step) {
  if (w_krsc_valid_ && w == w_krsc_source_ && weights_step == w_krsc_step_) {
    return absl::OkStatus();
  }
  w_krsc_valid_ = false;
  const Conv2DShape& s = shape_;
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchTranspose(w, s.kernel_h * s.kernel_w * (s.in_channels / s.groups),
                      s.out_channels, w_krsc_.floats(), device_->stream()),
      "Conv2D: transpose w HWIO->KRSC"));
  w_krsc_valid_ = true;
  w_krsc_source_ = w;
  w_krsc_step_ = weights_step;
  ++weight_transpose_count_;
  return absl::OkStatus();
}

PadGeometry Conv2DOp::InputPadding() const {
  const Conv2DShape& s = shape_;
  PadGeometry g;
  g.height = s.height;
  g.width = s.width;
  g.channels = s.in_channels;
  g.top = extra_top_;
  g.left = extra_left_;
  g.padded_height = s.height + extra_h_;
  g.padded_width = s.width + extra_w_;
  return g;
}

absl::StatusOr<const float*> Conv2DOp::Input(const float* x) {
  if (!pads_input_) return x;
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(LaunchPadNhwc(x, shape_.batch, InputPadding(), 0.0f,
                               x_padded_.floats(), device_->stream()),
                 "Conv2D: pad x"));
  return x_padded_.floats();
}

absl::Status Conv2DOp::Forward(const float* x, const float* w,
                               uint64_t weights_step, const float* b,
                               float* y) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckWeightedForward(kOp, x, w, b, y, shape_.use_bias));
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  PSTRAIN_RETURN_IF_ERROR(PrepareWeights(w, weights_step));
  PSTRAIN_ASSIGN_OR_RETURN(const float* input, Input(x));
  const float one = 1.0f;
  const float zero = 0.0f;
  PSTRAIN_RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionForward(device_->cudnn(), &one, x_desc_.get(), input,
                              w_desc_.get(), w_krsc_.data(), conv_desc_.get(),
                              fwd_algo_, device_->workspace(), fwd_workspace_,
                              &zero, y_desc_.get(), y),
      "Conv2D forward: cudnnConvolutionForward"));
  if (!shape_.use_bias) return absl::OkStatus();
  return CudaStatus(
      LaunchBiasAdd(b, shape_.batch * out_h_.output * out_w_.output,
                    shape_.out_channels, y, device_->stream()),
      "Conv2D forward: bias add");
}

absl::Status Conv2DOp::Backward(const float* x, const float* w,
                                uint64_t weights_step, const float* dy,
                                float* dx, float* dw, float* db) {
  PSTRAIN_RETURN_IF_ERROR(CheckWeightedBackward(
      kOp, x, w, dy, dx, dw, db, shape_.compute_dx, shape_.use_bias));
  const Conv2DShape& s = shape_;
  cudaStream_t stream = device_->stream();
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  const float one = 1.0f;
  const float zero = 0.0f;
  if (s.compute_dx) {
    PSTRAIN_RETURN_IF_ERROR(PrepareWeights(w, weights_step));
    float* out = pads_input_ ? dx_padded_.floats() : dx;
    PSTRAIN_RETURN_IF_ERROR(CudnnStatus(
        cudnnConvolutionBackwardData(device_->cudnn(), &one, w_desc_.get(),
                                     w_krsc_.data(), y_desc_.get(), dy,
                                     conv_desc_.get(), bwd_data_algo_,
                                     device_->workspace(), bwd_data_workspace_,
                                     &zero, x_desc_.get(), out),
        "Conv2D backward: cudnnConvolutionBackwardData"));
    if (pads_input_) {
      PSTRAIN_RETURN_IF_ERROR(
          CudaStatus(LaunchCropNhwc(dx_padded_.floats(), s.batch,
                                    InputPadding(), dx, stream),
                     "Conv2D backward: crop dx"));
    }
  }
  PSTRAIN_ASSIGN_OR_RETURN(const float* input, Input(x));
  PSTRAIN_RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardFilter(
          device_->cudnn(), &one, x_desc_.get(), input, y_desc_.get(), dy,
          conv_desc_.get(), bwd_filter_algo_, device_->workspace(),
          bwd_filter_workspace_, &zero, w_desc_.get(), dw_krsc_.data()),
      "Conv2D backward: cudnnConvolutionBackwardFilter"));
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchTranspose(dw_krsc_.floats(), s.out_channels,
                      s.kernel_h * s.kernel_w * (s.in_channels / s.groups), dw,
                      stream),
      "Conv2D backward: transpose dw KRSC->HWIO"));
  if (!s.use_bias) return absl::OkStatus();
  return CudaStatus(LaunchBiasGrad(dy, s.batch * out_h_.output * out_w_.output,
                                   s.out_channels, db, stream),
                    "Conv2D backward: bias gradient");
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

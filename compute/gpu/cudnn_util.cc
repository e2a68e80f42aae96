#include "compute/gpu/cudnn_util.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

void ReportDestroy(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "pstrain gpu: %s failed: %s\n", call,
                 cudnnGetErrorString(status));
  }
}

absl::StatusOr<TensorDescriptor> Tensor4d(absl::string_view op,
                                          cudnnTensorFormat_t format, int64_t n,
                                          int64_t c, int64_t h, int64_t w) {
  cudnnTensorDescriptor_t raw = nullptr;
  PSTRAIN_RETURN_IF_ERROR(
      CudnnStatus(cudnnCreateTensorDescriptor(&raw),
                  absl::StrCat(op, ": cudnnCreateTensorDescriptor")));
  TensorDescriptor desc(raw);
  PSTRAIN_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetTensor4dDescriptor(raw, format, CUDNN_DATA_FLOAT,
                                 static_cast<int>(n), static_cast<int>(c),
                                 static_cast<int>(h), static_cast<int>(w)),
      absl::StrCat(op, ": cudnnSetTensor4dDescriptor [", n, ", ", c, ", ", h,
                   ", ", w, "]")));
  return desc;
}

}  // namespace

void TensorDescriptorDeleter::operator()(cudnnTensorStruct* desc) const {
  ReportDestroy(cudnnDestroyTensorDescriptor(desc),
                "cudnnDestroyTensorDescriptor");
}

void FilterDescriptorDeleter::operator()(cudnnFilterStruct* desc) const {
  ReportDestroy(cudnnDestroyFilterDescriptor(desc),
                "cudnnDestroyFilterDescriptor");
}

void ConvolutionDescriptorDeleter::operator()(
    cudnnConvolutionStruct* desc) const {
  ReportDestroy(cudnnDestroyConvolutionDescriptor(desc),
                "cudnnDestroyConvolutionDescriptor");
}

void PoolingDescriptorDeleter::operator()(cudnnPoolingStruct* desc) const {
  ReportDestroy(cudnnDestroyPoolingDescriptor(desc),
                "cudnnDestroyPoolingDescriptor");
}

absl::StatusOr<TensorDescriptor> NhwcTensor(absl::string_view op, int64_t batch,
                                            int64_t height, int64_t width,
                                            int64_t channels) {
  // cudnnSetTensor4dDescriptor takes the dimensions in NCHW order whatever
  // the memory format.
  return Tensor4d(op, CUDNN_TENSOR_NHWC, batch, channels, height, width);
}

absl::StatusOr<TensorDescriptor> MatrixTensor(absl::string_view op,
                                              int64_t rows, int64_t cols) {
  return Tensor4d(op, CUDNN_TENSOR_NCHW, rows, cols, 1, 1);
}

absl::StatusOr<FilterDescriptor> KrscFilter(absl::string_view op,
                                            int64_t out_channels,
                                            int64_t in_channels,
                                            int64_t kernel_h,
                                            int64_t kernel_w) {
  cudnnFilterDescriptor_t raw = nullptr;
  PSTRAIN_RETURN_IF_ERROR(
      CudnnStatus(cudnnCreateFilterDescriptor(&raw),
                  absl::StrCat(op, ": cudnnCreateFilterDescriptor")));
  FilterDescriptor desc(raw);
  PSTRAIN_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetFilter4dDescriptor(
          raw, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC,
          static_cast<int>(out_channels), static_cast<int>(in_channels),
          static_cast<int>(kernel_h), static_cast<int>(kernel_w)),
      absl::StrCat(op, ": cudnnSetFilter4dDescriptor")));
  return desc;
}

absl::StatusOr<ConvolutionDescriptor> CreateConvolutionDescriptor(
    absl::string_view op) {
  cudnnConvolutionDescriptor_t raw = nullptr;
  PSTRAIN_RETURN_IF_ERROR(
      CudnnStatus(cudnnCreateConvolutionDescriptor(&raw),
                  absl::StrCat(op, ": cudnnCreateConvolutionDescriptor")));
  return ConvolutionDescriptor(raw);
}

absl::StatusOr<PoolingDescriptor> CreatePoolingDescriptor(
    absl::string_view op) {
  cudnnPoolingDescriptor_t raw = nullptr;
  PSTRAIN_RETURN_IF_ERROR(
      CudnnStatus(cudnnCreatePoolingDescriptor(&raw),
                  absl::StrCat(op, ": cudnnCreatePoolingDescriptor")));
  return PoolingDescriptor(raw);
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

// Owners of cuDNN descriptors for the GPU ops, created with every return
// code checked:
//
//   PSTRAIN_ASSIGN_OR_RETURN(TensorDescriptor x_desc,
//                            NhwcTensor("Conv2D", batch, height, width, c));
//   cudnnConvolutionForward(..., x_desc.get(), ...);
//
// Each is a std::unique_ptr over cuDNN's opaque struct whose deleter calls
// the matching cudnnDestroy* (a failure there is reported on stderr).
#ifndef PSTRAIN_COMPUTE_GPU_CUDNN_UTIL_H_
#define PSTRAIN_COMPUTE_GPU_CUDNN_UTIL_H_

#include <cudnn.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace worker {
namespace gpu {

struct TensorDescriptorDeleter {
  void operator()(cudnnTensorStruct* desc) const;
};
struct FilterDescriptorDeleter {
  void operator()(cudnnFilterStruct* desc) const;
};
struct ConvolutionDescriptorDeleter {
  void operator()(cudnnConvolutionStruct* desc) const;
};
struct PoolingDescriptorDeleter {
  void operator()(cudnnPoolingStruct* desc) const;
};

using TensorDescriptor =
    std::unique_ptr<cudnnTensorStruct, TensorDescriptorDeleter>;
using FilterDescriptor =
    std::unique_ptr<cudnnFilterStruct, FilterDescriptorDeleter>;
using ConvolutionDescriptor =
    std::unique_ptr<cudnnConvolutionStruct, ConvolutionDescriptorDeleter>;
using PoolingDescriptor =
    std::unique_ptr<cudnnPoolingStruct, PoolingDescriptorDeleter>;

// A float32 activation [batch, height, width, channels] in NHWC memory order.
// Sizes must fit in int (shape_check.h). `op` names the caller in errors.
absl::StatusOr<TensorDescriptor> NhwcTensor(absl::string_view op, int64_t batch,
                                            int64_t height, int64_t width,
                                            int64_t channels);

// A float32 matrix [rows, cols] as the NCHW tensor [rows, cols, 1, 1], for
// ops over the last axis (softmax).
absl::StatusOr<TensorDescriptor> MatrixTensor(absl::string_view op,
                                              int64_t rows, int64_t cols);

// A float32 convolution filter in cuDNN's NHWC filter format, i.e. memory
// order KRSC = [out, kh, kw, in].
absl::StatusOr<FilterDescriptor> KrscFilter(absl::string_view op,
                                            int64_t out_channels,
                                            int64_t in_channels,
                                            int64_t kernel_h, int64_t kernel_w);

absl::StatusOr<ConvolutionDescriptor> CreateConvolutionDescriptor(
    absl::string_view op);

absl::StatusOr<PoolingDescriptor> CreatePoolingDescriptor(absl::string_view op);

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_CUDNN_UTIL_H_

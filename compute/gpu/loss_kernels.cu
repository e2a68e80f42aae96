#include "compute/gpu/kernel_grid.h"
#include "compute/gpu/loss_kernels.h"
#include "compute/gpu/loss_math.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

// True if the row's label is 0 or 1; else records the row and zeroes its
// result and gradient.
__device__ bool BinaryLabel(const int32_t* labels, int64_t row, float* grad,
                            double* row_out, unsigned long long* bad_row) {
  if (labels[row] == 0 || labels[row] == 1) return true;
  atomicMin(bad_row, static_cast<unsigned long long>(row));
  row_out[row] = 0;
  if (grad != nullptr) grad[row] = 0.0f;
  return false;
}

__global__ void CategoricalFromLogitsKernel(const float* logits,
                                            const float* targets, int64_t batch,
                                            int64_t classes, float* dlogits,
                                            double* row_out) {
  for (int64_t row = FirstIndex(); row < batch; row += GridStride()) {
    row_out[row] = CategoricalCrossEntropyFromLogitsRow(
        logits + row * classes, targets + row * classes, classes,
        dlogits == nullptr ? nullptr : dlogits + row * classes);
  }
}

__global__ void CategoricalFromProbabilitiesKernel(
    const float* probs, const float* targets, int64_t batch, int64_t classes,
    float low, float high, float* dprobs, double* row_out) {
  for (int64_t row = FirstIndex(); row < batch; row += GridStride()) {
    row_out[row] = CategoricalCrossEntropyFromProbabilitiesRow(
        probs + row * classes, targets + row * classes, classes, low, high,
        dprobs == nullptr ? nullptr : dprobs + row * classes);
  }
}

__global__ void SigmoidCrossEntropyKernel(const float* logits,
                                          const int32_t* labels, int64_t batch,
                                          float* dlogits, double* row_out,
                                          unsigned long long* bad_row) {
  for (int64_t row = FirstIndex(); row < batch; row += GridStride()) {
    if (!BinaryLabel(labels, row, dlogits, row_out, bad_row)) continue;
    row_out[row] = SigmoidCrossEntropyRow(
        logits[row], labels[row], dlogits == nullptr ? nullptr : dlogits + row);
  }
}

__global__ void BinaryFromProbabilitiesKernel(
    const float* probs, const int32_t* labels, int64_t batch, float low,
    float high, float* dprobs, double* row_out, unsigned long long* bad_row) {
  for (int64_t row = FirstIndex(); row < batch; row += GridStride()) {
    if (!BinaryLabel(labels, row, dprobs, row_out, bad_row)) continue;
    row_out[row] = BinaryCrossEntropyFromProbabilityRow(
        probs[row], labels[row], low, high,
        dprobs == nullptr ? nullptr : dprobs + row);
  }
}

__global__ void AbsoluteErrorKernel(const float* predictions,
                                    const float* targets, int64_t batch,
                                    int64_t outputs, float* dpredictions,
                                    double* row_out) {
  for (int64_t row = FirstIndex(); row < batch; row += GridStride()) {
    row_out[row] = AbsoluteErrorRow(
        predictions + row * outputs, targets + row * outputs, outputs,
        dpredictions == nullptr ? nullptr : dpredictions + row * outputs);
  }
}

__global__ void HuberKernel(const float* predictions, const float* targets,
                            int64_t batch, int64_t outputs, float delta,
                            float* dpredictions, double* row_out) {
  for (int64_t row = FirstIndex(); row < batch; row += GridStride()) {
    row_out[row] = HuberRow(
        predictions + row * outputs, targets + row * outputs, outputs, delta,
        dpredictions == nullptr ? nullptr : dpredictions + row * outputs);
  }
}

__global__ void CountBinaryCorrectKernel(const float* scores, float threshold,
                                         const int32_t* labels, int64_t batch,
                                         double* row_out,
                                         unsigned long long* bad_row) {
  for (int64_t row = FirstIndex(); row < batch; row += GridStride()) {
    if (!BinaryLabel(labels, row, nullptr, row_out, bad_row)) continue;
    row_out[row] = BinaryCorrectRow(scores[row], threshold, labels[row]);
  }
}

}  // namespace

cudaError_t LaunchCategoricalCrossEntropyFromLogits(
    const float* logits, const float* targets, int64_t batch, int64_t classes,
    float* dlogits, double* row_out, cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  CategoricalFromLogitsKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(
      logits, targets, batch, classes, dlogits, row_out);
  return cudaGetLastError();
}

cudaError_t LaunchCategoricalCrossEntropyFromProbabilities(
    const float* probs, const float* targets, int64_t batch, int64_t classes,
    float low, float high, float* dprobs, double* row_out,
    cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  CategoricalFromProbabilitiesKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(
      probs, targets, batch, classes, low, high, dprobs, row_out);
  return cudaGetLastError();
}

cudaError_t LaunchSigmoidCrossEntropy(const float* logits,
                                      const int32_t* labels, int64_t batch,
                                      float* dlogits, double* row_out,
                                      unsigned long long* bad_row,
                                      cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  SigmoidCrossEntropyKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(
      logits, labels, batch, dlogits, row_out, bad_row);
  return cudaGetLastError();
}

cudaError_t LaunchBinaryCrossEntropyFromProbabilities(
    const float* probs, const int32_t* labels, int64_t batch, float low,
    float high, float* dprobs, double* row_out, unsigned long long* bad_row,
    cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  BinaryFromProbabilitiesKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(
      probs, labels, batch, low, high, dprobs, row_out, bad_row);
  return cudaGetLastError();
}

cudaError_t LaunchAbsoluteError(const float* predictions, const float* targets,
                                int64_t batch, int64_t outputs,
                                float* dpredictions, double* row_out,
                                cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  AbsoluteErrorKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(
      predictions, targets, batch, outputs, dpredictions, row_out);
  return cudaGetLastError();
}

cudaError_t LaunchHuber(const float* predictions, const float* targets,
                        int64_t batch, int64_t outputs, float delta,
                        float* dpredictions, double* row_out,
                        cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  HuberKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(
      predictions, targets, batch, outputs, delta, dpredictions, row_out);
  return cudaGetLastError();
}

cudaError_t LaunchCountBinaryCorrect(const float* scores, float threshold,
                                     const int32_t* labels, int64_t batch,
                                     double* row_out,
                                     unsigned long long* bad_row,
                                     cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  CountBinaryCorrectKernel<<<BlocksFor(batch), kThreads, 0, stream>>>(
      scores, threshold, labels, batch, row_out, bad_row);
  return cudaGetLastError();
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

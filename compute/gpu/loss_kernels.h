// The GPU loss kernels beyond kernels.h's: categorical cross-entropy on
// target rows (from logits and from probabilities), binary cross-entropy on
// one output per example (from a logit and from a probability), mean
// absolute error, Huber and binary accuracy, for gpu::Losses (losses.h).
//
// Plain C++ (compiled by nvcc, no Abseil), as kernels.h: each Launch*
// enqueues one kernel on `stream` and returns the launch error. One thread
// per row (example) computes loss_math.h's row function and writes the row's
// result into row_out[row] (double); the caller adds them on the host. The
// binary kernels take int32 labels that must be 0 or 1: a row with another
// label gets 0 and no gradient, and the smallest such row is atomicMin-ed
// into *bad_row, which the caller sets to all ones beforehand. A null
// gradient pointer skips the gradient. All pointers are device pointers.
#ifndef PSTRAIN_COMPUTE_GPU_LOSS_KERNELS_H_
#define PSTRAIN_COMPUTE_GPU_LOSS_KERNELS_H_

#include <cuda_runtime.h>
#include <stdint.h>

namespace pstrain {
namespace worker {
namespace gpu {

// logits, targets, dlogits: [batch, classes].
cudaError_t LaunchCategoricalCrossEntropyFromLogits(
    const float* logits, const float* targets, int64_t batch, int64_t classes,
    float* dlogits, double* row_out, cudaStream_t stream);

// probs, targets, dprobs: [batch, classes]; clipped to [low, high].
cudaError_t LaunchCategoricalCrossEntropyFromProbabilities(
    const float* probs, const float* targets, int64_t batch, int64_t classes,
    float low, float high, float* dprobs, double* row_out, cudaStream_t stream);

// logits, labels, dlogits: [batch].
cudaError_t LaunchSigmoidCrossEntropy(const float* logits,
                                      const int32_t* labels, int64_t batch,
                                      float* dlogits, double* row_out,
                                      unsigned long long* bad_row,
                                      cudaStream_t stream);

// probs, labels, dprobs: [batch]; clipped to [low, high].
cudaError_t LaunchBinaryCrossEntropyFromProbabilities(
    const float* probs, const int32_t* labels, int64_t batch, float low,
    float high, float* dprobs, double* row_out, unsigned long long* bad_row,
    cudaStream_t stream);

// predictions, targets, dpredictions: [batch, outputs]; row_out is the
// row's sum of |error|, not yet divided by outputs.
cudaError_t LaunchAbsoluteError(const float* predictions, const float* targets,
                                int64_t batch, int64_t outputs,
                                float* dpredictions, double* row_out,
                                cudaStream_t stream);

// As LaunchAbsoluteError with the Huber function of delta.
cudaError_t LaunchHuber(const float* predictions, const float* targets,
                        int64_t batch, int64_t outputs, float delta,
                        float* dpredictions, double* row_out,
                        cudaStream_t stream);

// row_out = 1 where (score > threshold) equals the label, else 0.
cudaError_t LaunchCountBinaryCorrect(const float* scores, float threshold,
                                     const int32_t* labels, int64_t batch,
                                     double* row_out,
                                     unsigned long long* bad_row,
                                     cudaStream_t stream);

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_LOSS_KERNELS_H_

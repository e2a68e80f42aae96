// Keras BatchNormalization over the last axis (axis=-1, channels_last),
// forward (training and inference) and backward, on oneDNN's
// batch_normalization primitive with our own batch statistics.
//
// x is any channels-last activation viewed as [rows, channels], rows being
// batch * spatial positions. Per channel c:
//   training:   mean[c] = sum_r x[r, c] / rows
//               var[c]  = sum_r (x[r, c] - mean[c])^2 / rows   (biased)
//   inference:  mean = moving_mean, var = moving_var (as given)
//   y[r, c] = gamma[c] * (x[r, c] - mean[c]) / sqrt(var[c] + epsilon)
//             + beta[c]
// gamma is taken as 1 when !scale and beta as 0 when !center (their
// pointers are then null). ForwardTraining also writes mean and var out as
// batch_mean and batch_var: the ps folds them into Keras's moving
// statistics (Keras 3 moves moving_variance toward this biased variance;
// tf.keras 2's fused kernel toward the unbiased var * rows / (rows - 1)).
//
// Backward is the exact gradient of a training Forward, through the batch
// statistics (xhat = (x - mean) / sqrt(var + epsilon)):
//   dbeta[c]  = sum_r dy[r, c]
//   dgamma[c] = sum_r dy[r, c] * xhat[r, c]
//   dx[r, c]  = gamma[c] / sqrt(var[c] + epsilon) *
//               (dy[r, c] - dbeta[c] / rows - xhat[r, c] * dgamma[c] / rows)
//
//   BatchNormShape shape;
//   shape.rows = batch * height * width; shape.channels = 32;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchNormOp> norm,
//                            BatchNormOp::Create(shape, engine));
//   PSTRAIN_RETURN_IF_ERROR(
//       norm->ForwardTraining(x, gamma, beta, y, batch_mean, batch_var));
//   PSTRAIN_RETURN_IF_ERROR(
//       norm->Backward(x, gamma, dy, dx, dgamma, dbeta));
//   ...
//   PSTRAIN_RETURN_IF_ERROR(norm->ForwardInference(
//       x, gamma, beta, moving_mean, moving_var, y));
//
// The two forwards have distinct names because their argument lists differ
// only in constness.
//
// What runs where: the batch statistics are our own loop, accumulated in
// double (two passes over x: the mean, then the mean of squared
// deviations); oneDNN 2.6's training forward sums in float32, which at
// rows = 32 * 28 * 28 put y off by 3e-5 for inputs of mean 3 and std 0.6,
// and by 8e-4 for mean 100, where ours stay near float rounding. The
// normalization (both modes) is one oneDNN batch_normalization primitive
// with use_global_stats, the statistics given. Backward is our own loop:
// its sums (dbeta, dgamma, and the dx terms built from them) accumulate in
// double, as the GPU op's do. oneDNN's backward sums them in float32, 1e-6
// off over 256 rows and about 1e-4 over a batch of 28x28 images, and that
// offset shifts every row's dx alike, so the gradient of a convolution
// before it (whose ReLU-fed input never cancels it) drifted 4x past 1e-4 of
// TensorFlow.js's. The op keeps the last training Forward's statistics in
// buffers allocated in Create; Backward reuses them, so it must be given
// that Forward's x. Not thread-safe; see Engine.
#ifndef PSTRAIN_COMPUTE_CPU_BATCH_NORM_H_
#define PSTRAIN_COMPUTE_CPU_BATCH_NORM_H_

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/batch_norm_base.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/op_shapes.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

// The public methods, their checks and their contract are BatchNormBase's
// (compute/batch_norm_base.h); this is the oneDNN half.
class BatchNormOp : public BatchNormBase {
 public:
  // INVALID_ARGUMENT for a non-positive size or an epsilon that is negative
  // or not finite; a oneDNN failure as a status naming BatchNorm.
  static absl::StatusOr<std::unique_ptr<BatchNormOp>> Create(
      const BatchNormShape& shape, Engine* engine);

 private:
  BatchNormOp(const BatchNormShape& shape, Engine* engine)
      : BatchNormBase(shape), engine_(engine) {}

  absl::Status Init();
  absl::Status RunForwardTraining(const Buffers& b) override;
  absl::Status RunForwardInference(const Buffers& b) override;
  absl::Status RunBackward(const Buffers& b) override;
  // mean_ and variance_ of x, in double.
  void Statistics(const float* x);
  // sums_ = the sum over chunks of partials_, in chunk order.
  void SumPartials(int64_t rows);

  Engine* const engine_;

  std::vector<float> mean_, variance_;  // The last training Forward's.
  std::vector<double> sums_;            // [2 * channels], for the loops.
  std::vector<double> mean_double_;     // [channels]: the mean, unrounded.
  // The loops run over chunks of rows_per_chunk_ rows (fixed by the shape,
  // so that sums do not depend on the thread count), each chunk's sums in
  // partials_ ([chunks][2 * channels]).
  int64_t rows_per_chunk_ = 1;
  std::vector<double> partials_;
  // Backward's per-channel coefficients of dx.
  std::vector<float> dx_scale_, dx_shift_, dx_slope_;

  dnnl::memory x_mem_, y_mem_, gamma_mem_, beta_mem_, mean_mem_, var_mem_;
  dnnl::memory moving_mean_mem_, moving_var_mem_;
  // Normalizes with given statistics: ours (train_args_) or the moving ones
  // (infer_args_).
  dnnl::batch_normalization_forward normalize_;
  std::unordered_map<int, dnnl::memory> train_args_;
  std::unordered_map<int, dnnl::memory> infer_args_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_BATCH_NORM_H_

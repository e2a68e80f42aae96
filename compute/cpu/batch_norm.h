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
#include "compute/cpu/engine.h"
#include "compute/cpu/op_shapes.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

class BatchNormOp {
 public:
  // INVALID_ARGUMENT for a non-positive size or an epsilon that is negative
  // or not finite; a oneDNN failure as a status naming BatchNorm.
  static absl::StatusOr<std::unique_ptr<BatchNormOp>> Create(
      const BatchNormShape& shape, Engine* engine);

  BatchNormOp(const BatchNormOp&) = delete;
  BatchNormOp& operator=(const BatchNormOp&) = delete;

  const BatchNormShape& shape() const { return shape_; }

  // Training: y [rows, channels] normalized with x's own statistics, which
  // are written to batch_mean and batch_var ([channels] each; either may be
  // null if not wanted) and kept for Backward. gamma [channels] is null iff
  // !scale, beta [channels] null iff !center.
  absl::Status ForwardTraining(const float* x, const float* gamma,
                               const float* beta, float* y, float* batch_mean,
                               float* batch_var);

  // Inference: y normalized with the given moving_mean and moving_var
  // ([channels] each, required). Leaves the kept statistics alone.
  absl::Status ForwardInference(const float* x, const float* gamma,
                                const float* beta, const float* moving_mean,
                                const float* moving_var, float* y);

  // The gradient of the last ForwardTraining, whose x this must be, from
  // dy = dL/dy: overwrites dx [rows, channels] (may be null: not computed),
  // dgamma (null iff !scale) and dbeta (null iff !center). gamma is null iff
  // !scale. FAILED_PRECONDITION before any ForwardTraining.
  absl::Status Backward(const float* x, const float* gamma, const float* dy,
                        float* dx, float* dgamma, float* dbeta);

 private:
  BatchNormOp(const BatchNormShape& shape, Engine* engine)
      : shape_(shape), engine_(engine) {}

  absl::Status Init();
  absl::Status CheckParams(const char* what, const float* gamma,
                           const float* beta) const;
  // mean_ and variance_ of x, in double.
  void Statistics(const float* x);
  // sums_ = the sum over chunks of partials_, in chunk order.
  void SumPartials(int64_t rows);

  const BatchNormShape shape_;
  Engine* const engine_;
  bool has_forward_ = false;

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

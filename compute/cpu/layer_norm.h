// Keras LayerNormalization over the last axis (axis=-1), forward and backward
// on oneDNN's layer_normalization primitive.
//
// x is any activation viewed as [rows, width], width its last axis and rows
// the product of all others (batch included). Per row r, with the biased
// variance as Keras computes it (divided by width, not width - 1):
//   mean[r] = sum_i x[r, i] / width
//   var[r]  = sum_i (x[r, i] - mean[r])^2 / width
//   xhat    = (x[r, i] - mean[r]) / sqrt(var[r] + epsilon)
//   y[r, i] = gamma[i] * xhat + beta[i]
// gamma is taken as 1 when !scale and beta as 0 when !center (their
// pointers are then null). Backward is the exact gradient of y, through
// mean and var, with respect to x, gamma and beta:
//   dbeta[i]  = sum_r dy[r, i]
//   dgamma[i] = sum_r dy[r, i] * xhat[r, i]
//   dx[r, i]  = (g[r, i] - mean_i'(g[r, :]) - xhat[r, i] *
//                mean_i'(g[r, :] * xhat[r, :])) / sqrt(var[r] + epsilon)
//               with g = dy * gamma.
//
//   LayerNormShape shape;
//   shape.rows = batch * steps; shape.width = 64;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LayerNormOp> norm,
//                            LayerNormOp::Create(shape, engine));
//   PSTRAIN_RETURN_IF_ERROR(norm->Forward(x, gamma, beta, y));
//   PSTRAIN_RETURN_IF_ERROR(
//       norm->Backward(x, gamma, dy, dx, dgamma, dbeta));
//
// oneDNN computes the statistics in float32 (two passes: the mean, then the
// mean of squared deviations), accurate over one row of a layer's width
// (the drift of long float sums that batch_norm.h avoids needs far more
// terms). Forward keeps each row's mean and variance (oneDNN's backward
// takes those, not 1 / sqrt(var + epsilon)) in buffers allocated in Create;
// Backward reuses them, so it must be given the x of the last Forward. With dx
// null, Backward computes dgamma and dbeta in our own loop (double
// accumulation) and runs no primitive, so no scratch buffer for an unwanted dx
// is needed. Not thread-safe; see Engine.
#ifndef PSTRAIN_COMPUTE_CPU_LAYER_NORM_H_
#define PSTRAIN_COMPUTE_CPU_LAYER_NORM_H_

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/op_shapes.h"
#include "compute/layer_norm_base.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

// The public methods, their checks and their contract are LayerNormBase's
// (compute/layer_norm_base.h); this is the oneDNN half.
class LayerNormOp : public LayerNormBase {
 public:
  // INVALID_ARGUMENT for a non-positive size or an epsilon that is negative
  // or not finite; a oneDNN failure as a status naming LayerNorm.
  static absl::StatusOr<std::unique_ptr<LayerNormOp>> Create(
      const LayerNormShape& shape, Engine* engine);

  // The last Forward's per-row statistics, [rows] each.
  const std::vector<float>& mean() const { return mean_; }
  const std::vector<float>& variance() const { return variance_; }

 private:
  LayerNormOp(const LayerNormShape& shape, Engine* engine)
      : LayerNormBase(shape), engine_(engine) {}

  absl::Status Init();
  absl::Status RunForward(const float* x, const float* gamma, const float* beta,
                          float* y) override;
  absl::Status RunBackward(const float* x, const float* gamma, const float* dy,
                           float* dx, float* dgamma, float* dbeta) override;
  // dgamma and dbeta without dx, in double.
  void ParamGradients(const float* x, const float* dy, float* dgamma,
                      float* dbeta);

  Engine* const engine_;

  std::vector<float> mean_, variance_;
  std::vector<double> sums_;  // [2 * width], for ParamGradients.

  dnnl::memory x_mem_, y_mem_, gamma_mem_, beta_mem_, mean_mem_, var_mem_;
  dnnl::memory dy_mem_, dx_mem_, dgamma_mem_, dbeta_mem_;
  dnnl::layer_normalization_forward fwd_;
  std::unordered_map<int, dnnl::memory> fwd_args_;
  dnnl::layer_normalization_backward bwd_;
  std::unordered_map<int, dnnl::memory> bwd_args_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_LAYER_NORM_H_

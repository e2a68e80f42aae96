// Optimizers applied on the ps: the update rule, kept out of the transport
// and the store (as ps-lite's pluggable updater).
//
// An Optimizer updates a contiguous run of elements of one variable (a whole
// slice, or one embedding row) from a gradient divided by the batch it was
// computed on (before, or as it is read: ScaledGradient). Its per-element
// state lives in "slots" the caller owns, one float array per slot, each as
// long as the elements, initialized to SlotInitialValue(). The formulas are
// Keras's (keras/optimizers/*.py, Keras 3), with optional L2 weight decay
// added to the gradient first (g += weight_decay * w):
//   sgd:       w -= lr * g
//   momentum:  m = momentum * m - lr * g;
//              w += m                         (nesterov: w += momentum * m - lr
//              * g)
//   adagrad:   a += g * g;  w -= lr * g / sqrt(a + epsilon)
//              (epsilon_outside_sqrt, TensorFlow's ApplyAdagradV2 and
//              PyTorch's Adagrad without lr_decay:
//              w -= lr * g / (sqrt(a) + epsilon))
//   adam:      m += (g - m) * (1 - beta_1);  v += (g * g - v) * (1 - beta_2);
//              w -= lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) +
//              epsilon)
// where t is the 1-based count of updates applied to the variable, this one
// included; and, for embedding rows (--embedding_optimizer):
//   ftrl:      TensorFlow's Ftrl (ApplyFtrlV2), see OptimizerConfig.Ftrl;
//   lazy_adam: adam whose t is the count of updates of the elements given
//              (one row), kept in a third slot "t" (the t argument ignored).
//
//   absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config);
//   std::vector<std::vector<float>> slots(...);  // NumSlots() arrays
//   (*opt)->Apply(w, g, {slots[0].data()}, /*t=*/1);
//
// Optimizers are immutable after creation: Apply() may run concurrently on
// disjoint elements.
#ifndef PSTRAIN_PS_OPTIMIZER_H_
#define PSTRAIN_PS_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace ps {

// A gradient as an optimizer reads it: `size` little-endian float32 values
// at `data`, any address (a push's floats lie where they arrived in gRPC's
// buffers), each multiplied by `scale` as it is read. The ps hands pushed
// bytes and the 1 / batch scale straight to the optimizer, so that a push is
// applied in one pass over the gradient and the variable.
class ScaledGradient {
 public:
  ScaledGradient(const char* data, size_t size, float scale)
      : data_(data), size_(size), scale_(scale) {}
  // Aligned floats, times `scale`.
  explicit ScaledGradient(absl::Span<const float> g, float scale = 1.0f)
      : ScaledGradient(reinterpret_cast<const char*>(g.data()), g.size(),
                       scale) {}

  size_t size() const { return size_; }
  // Element i times the scale (loops of these vectorize with unaligned
  // loads).
  float operator[](size_t i) const {
    float f;
    std::memcpy(&f, data_ + 4 * i, 4);
    return f * scale_;
  }

 private:
  const char* data_;
  size_t size_;
  float scale_;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Number of state arrays per variable: sgd 0, momentum 1, adagrad 1, adam 2,
  // ftrl 2, lazy_adam 3.
  virtual int NumSlots() const = 0;

  // Name of slot `i`, used in checkpoints as "<variable>/<name>": momentum
  // "momentum", adagrad "accumulator", adam "m" and "v", ftrl "accumulator"
  // and "linear", lazy_adam "m", "v" and "t".
  virtual std::string SlotName(int i) const = 0;

  // Initial value of every element of slot `i` (adagrad's and ftrl's
  // initial_accumulator_value; 0 otherwise).
  virtual float SlotInitialValue(int i) const = 0;

  // Updates w[i] for every i from g[i] (divided by the batch: by the
  // gradient's scale or before) and the slots. REQUIRES: g.size() ==
  // w.size(); slots.size() == NumSlots(), each pointing at w.size() floats;
  // t >= 1.
  virtual void Apply(absl::Span<float> w, const ScaledGradient& g,
                     absl::Span<float* const> slots, int64_t t) const = 0;
  void Apply(absl::Span<float> w, absl::Span<const float> g,
             absl::Span<float* const> slots, int64_t t) const {
    Apply(w, ScaledGradient(g), slots, t);
  }
};

// The optimizer `config` describes, or INVALID_ARGUMENT naming the bad field
// ("optimizer.learning_rate: -0.1 must be > 0", "optimizer: no kind set",
// momentum outside [0, 1), betas outside [0, 1), epsilon < 0, negative
// weight_decay or initial_accumulator_value, non-finite values).
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(
    const OptimizerConfig& config);

// How CheckOptimizerConfig names a bad field in its error, given the field's
// path in OptimizerConfig ("learning_rate", "adam.beta_1", ...).
using FieldName = std::function<std::string(absl::string_view field)>;

// OK if CreateOptimizer(config) would succeed, else its error with the bad
// field called `name(field)` (CreateOptimizer: "optimizer.<field>"). The
// chief checks its flags with it before starting a run, naming each flag.
absl::Status CheckOptimizerConfig(const OptimizerConfig& config,
                                  const FieldName& name);

// What a VariableDef.moving_average variable applies instead of the run's
// optimizer: w = momentum * w + (1 - momentum) * g, g the step's average of
// what was pushed (no slots). INVALID_ARGUMENT unless momentum is in [0, 1).
absl::StatusOr<std::unique_ptr<Optimizer>> CreateMovingAverage(
    float momentum);

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_OPTIMIZER_H_

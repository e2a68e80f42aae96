#include "ps/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/macros.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace pstrain {
namespace ps {
namespace {

// Calls step(i, g_eff) for every element, where g_eff = g[i] + weight_decay *
// w[i], read before step updates w[i]. The decay test is made once per call,
// not per element, so both loops stay branch-free; `step` is a lambda, inlined.
template <typename Step>
inline void ForEachElement(absl::Span<float> w, const ScaledGradient& g,
                           float weight_decay, Step step) {
  ABSL_ASSERT(g.size() == w.size());
  const float* wp = w.data();
  const size_t n = w.size();
  if (weight_decay == 0.0f) {
    for (size_t i = 0; i < n; ++i) step(i, g[i]);
  } else {
    for (size_t i = 0; i < n; ++i) step(i, g[i] + weight_decay * wp[i]);
  }
}

class Sgd final : public Optimizer {
 public:
  Sgd(float lr, float weight_decay) : lr_(lr), weight_decay_(weight_decay) {}

  int NumSlots() const override { return 0; }
  std::string SlotName(int i) const override { return ""; }
  float SlotInitialValue(int i) const override { return 0.0f; }

  void Apply(absl::Span<float> w, const ScaledGradient& g,
             absl::Span<float* const> slots, int64_t t) const override {
    ABSL_ASSERT(slots.empty());
    float* wp = w.data();
    const float lr = lr_;
    ForEachElement(w, g, weight_decay_,
                   [=](size_t i, float gi) { wp[i] -= lr * gi; });
  }

 private:
  const float lr_;
  const float weight_decay_;
};

class Momentum final : public Optimizer {
 public:
  Momentum(float lr, float weight_decay, float momentum, bool nesterov)
      : lr_(lr),
        weight_decay_(weight_decay),
        momentum_(momentum),
        nesterov_(nesterov) {}

  int NumSlots() const override { return 1; }
  std::string SlotName(int i) const override { return "momentum"; }
  float SlotInitialValue(int i) const override { return 0.0f; }

  void Apply(absl::Span<float> w, const ScaledGradient& g,
             absl::Span<float* const> slots, int64_t t) const override {
    ABSL_ASSERT(slots.size() == 1);
    float* wp = w.data();
    float* m = slots[0];
    const float lr = lr_;
    const float mu = momentum_;
    if (nesterov_) {
      ForEachElement(w, g, weight_decay_, [=](size_t i, float gi) {
        m[i] = mu * m[i] - lr * gi;
        wp[i] += mu * m[i] - lr * gi;
      });
    } else {
      ForEachElement(w, g, weight_decay_, [=](size_t i, float gi) {
        m[i] = mu * m[i] - lr * gi;
        wp[i] += m[i];
      });
    }
  }

 private:
  const float lr_;
  const float weight_decay_;
  const float momentum_;
  const bool nesterov_;
};

class Adagrad final : public Optimizer {
 public:
  Adagrad(float lr, float weight_decay, float initial_accumulator_value,
          float epsilon, bool epsilon_outside_sqrt)
      : lr_(lr),
        weight_decay_(weight_decay),
        initial_accumulator_value_(initial_accumulator_value),
        epsilon_(epsilon),
        epsilon_outside_sqrt_(epsilon_outside_sqrt) {}

  int NumSlots() const override { return 1; }
  std::string SlotName(int i) const override { return "accumulator"; }
  float SlotInitialValue(int i) const override {
    return initial_accumulator_value_;
  }

  void Apply(absl::Span<float> w, const ScaledGradient& g,
             absl::Span<float* const> slots, int64_t t) const override {
    ABSL_ASSERT(slots.size() == 1);
    float* wp = w.data();
    float* a = slots[0];
    const float lr = lr_;
    const float eps = epsilon_;
    if (epsilon_outside_sqrt_) {
      ForEachElement(w, g, weight_decay_, [=](size_t i, float gi) {
        a[i] += gi * gi;
        wp[i] -= lr * gi / (std::sqrt(a[i]) + eps);
      });
      return;
    }
    ForEachElement(w, g, weight_decay_, [=](size_t i, float gi) {
      a[i] += gi * gi;
      wp[i] -= lr * gi / std::sqrt(a[i] + eps);
    });
  }

 private:
  const float lr_;
  const float weight_decay_;
  const float initial_accumulator_value_;
  const float epsilon_;
  const bool epsilon_outside_sqrt_;
};

// TensorFlow's ApplyFtrlV2, element by element (see OptimizerConfig.Ftrl).
class Ftrl final : public Optimizer {
 public:
  Ftrl(double lr, float weight_decay, const OptimizerConfig::Ftrl& config)
      : lr_(lr),
        weight_decay_(weight_decay),
        power_(config.learning_rate_power()),
        initial_accumulator_value_(config.initial_accumulator_value()),
        l1_(config.l1_regularization_strength()),
        // Keras folds beta into the online L2: l2 + beta / (2 lr).
        l2_(config.l2_regularization_strength() +
            static_cast<float>(config.beta() / (2.0 * lr))),
        shrinkage_(config.l2_shrinkage_regularization_strength()) {}

  int NumSlots() const override { return 2; }
  std::string SlotName(int i) const override {
    return i == 0 ? "accumulator" : "linear";
  }
  float SlotInitialValue(int i) const override {
    return i == 0 ? initial_accumulator_value_ : 0.0f;
  }

  void Apply(absl::Span<float> w, const ScaledGradient& g,
             absl::Span<float* const> slots, int64_t t) const override {
    ABSL_ASSERT(slots.size() == 2);
    float* wp = w.data();
    float* n = slots[0];
    float* z = slots[1];
    const float lr = static_cast<float>(lr_);
    const float power = power_;
    const float l1 = l1_;
    const float l2 = l2_;
    const float shrinkage = shrinkage_;
    // n^-p: TensorFlow takes the square root for the default p = -0.5.
    auto scaled = [power](float x) {
      return power == -0.5f ? std::sqrt(x) : std::pow(x, -power);
    };
    ForEachElement(w, g, weight_decay_, [=](size_t i, float gi) {
      const float shrunk = gi + 2.0f * shrinkage * wp[i];
      const float n_new = n[i] + gi * gi;
      const float n_new_scaled = scaled(n_new);
      z[i] += shrunk - (n_new_scaled - scaled(n[i])) / lr * wp[i];
      n[i] = n_new;
      const float quadratic = n_new_scaled / lr + 2.0f * l2;
      wp[i] = std::fabs(z[i]) > l1
                  ? (std::copysign(l1, z[i]) - z[i]) / quadratic
                  : 0.0f;
    });
  }

 private:
  const double lr_;
  const float weight_decay_;
  const float power_;
  const float initial_accumulator_value_;
  const float l1_;
  const float l2_;
  const float shrinkage_;
};

class Adam final : public Optimizer {
 public:
  Adam(double lr, float weight_decay, float beta_1, float beta_2,
       float epsilon)
      : lr_(lr),
        weight_decay_(weight_decay),
        beta_1_(beta_1),
        beta_2_(beta_2),
        epsilon_(epsilon) {}

  int NumSlots() const override { return 2; }
  std::string SlotName(int i) const override { return i == 0 ? "m" : "v"; }
  float SlotInitialValue(int i) const override { return 0.0f; }

  void Apply(absl::Span<float> w, const ScaledGradient& g,
             absl::Span<float* const> slots, int64_t t) const override {
    ABSL_ASSERT(slots.size() == 2);
    ABSL_ASSERT(t >= 1);
    // The bias correction is one scalar per call: computed in double so that
    // 1 - beta^t keeps its precision for small t and betas near 1.
    const double step = static_cast<double>(t);
    const float alpha = static_cast<float>(
        lr_ * std::sqrt(1.0 - std::pow(static_cast<double>(beta_2_), step)) /
        (1.0 - std::pow(static_cast<double>(beta_1_), step)));
    float* wp = w.data();
    float* m = slots[0];
    float* v = slots[1];
    const float one_minus_b1 = 1.0f - beta_1_;
    const float one_minus_b2 = 1.0f - beta_2_;
    const float eps = epsilon_;
    ForEachElement(w, g, weight_decay_, [=](size_t i, float gi) {
      m[i] += (gi - m[i]) * one_minus_b1;
      v[i] += (gi * gi - v[i]) * one_minus_b2;
      wp[i] -= m[i] * alpha / (std::sqrt(v[i]) + eps);
    });
  }

 private:
  const double lr_;
  const float weight_decay_;
  const float beta_1_;
  const float beta_2_;
  const float epsilon_;
};

// Adam with a step count per call: slot 2 holds, in every element, the
// updates applied to the elements Apply is given (an embedding row), so a
// row's moments and bias correction advance only when the row is updated.
// The count is a float: exact up to 2^24 updates of one row, after which it
// stays there (the bias correction is 1 long before).
class LazyAdam final : public Optimizer {
 public:
  LazyAdam(double lr, float weight_decay, float beta_1, float beta_2,
           float epsilon)
      : adam_(lr, weight_decay, beta_1, beta_2, epsilon) {}

  int NumSlots() const override { return 3; }
  std::string SlotName(int i) const override {
    return i == 2 ? "t" : adam_.SlotName(i);
  }
  float SlotInitialValue(int i) const override { return 0.0f; }

  void Apply(absl::Span<float> w, const ScaledGradient& g,
             absl::Span<float* const> slots, int64_t) const override {
    ABSL_ASSERT(slots.size() == 3);
    if (w.empty()) return;
    float* count = slots[2];
    const float t = count[0] + 1.0f;
    std::fill(count, count + w.size(), t);
    adam_.Apply(w, g, slots.subspan(0, 2), static_cast<int64_t>(t));
  }

 private:
  const Adam adam_;
};

constexpr char kNoKind[] =
    "optimizer: no kind set (expected sgd, momentum, adagrad, adam, ftrl or "
    "lazy_adam)";

// "<name(field)>: <value> must <requirement>".
absl::Status Invalid(const FieldName& name, absl::string_view field,
                     double value, const char* requirement) {
  return absl::InvalidArgumentError(
      absl::StrCat(name(field), ": ", value, " must ", requirement));
}

// OK if `value` is finite and >= 0.
absl::Status CheckNonNegative(const FieldName& name, absl::string_view field,
                              float value) {
  if (!std::isfinite(value)) return Invalid(name, field, value, "be finite");
  if (value < 0.0f) return Invalid(name, field, value, "be >= 0");
  return absl::OkStatus();
}

// OK if `value` is in [0, 1) (which excludes NaN and infinities).
absl::Status CheckUnitInterval(const FieldName& name, absl::string_view field,
                               float value) {
  if (!(value >= 0.0f && value < 1.0f)) {
    return Invalid(name, field, value, "be in [0, 1)");
  }
  return absl::OkStatus();
}

class MovingAverage final : public Optimizer {
 public:
  explicit MovingAverage(float momentum) : momentum_(momentum) {}
  int NumSlots() const override { return 0; }
  std::string SlotName(int) const override { return ""; }
  float SlotInitialValue(int) const override { return 0; }
  void Apply(absl::Span<float> w, const ScaledGradient& g,
             absl::Span<float* const>, int64_t) const override {
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] = momentum_ * w[i] + (1 - momentum_) * g[i];
    }
  }

 private:
  const float momentum_;
};

absl::Status CheckLearningRate(const FieldName& name, double lr) {
  if (!std::isfinite(lr)) {
    return Invalid(name, "learning_rate", lr, "be finite");
  }
  if (!(lr > 0.0)) return Invalid(name, "learning_rate", lr, "be > 0");
  // The per-element updates run in float: the rate must survive the cast.
  const float lr_float = static_cast<float>(lr);
  if (!std::isfinite(lr_float) || lr_float == 0.0f) {
    return Invalid(name, "learning_rate", lr, "be representable as a float");
  }
  return absl::OkStatus();
}

absl::Status CheckFtrl(const FieldName& name,
                       const OptimizerConfig::Ftrl& ftrl) {
  const float power = ftrl.learning_rate_power();
  if (!std::isfinite(power)) {
    return Invalid(name, "ftrl.learning_rate_power", power, "be finite");
  }
  if (power > 0.0f) {
    return Invalid(name, "ftrl.learning_rate_power", power, "be <= 0");
  }
  const std::pair<const char*, float> non_negative[] = {
      {"ftrl.initial_accumulator_value", ftrl.initial_accumulator_value()},
      {"ftrl.l1_regularization_strength", ftrl.l1_regularization_strength()},
      {"ftrl.l2_regularization_strength", ftrl.l2_regularization_strength()},
      {"ftrl.l2_shrinkage_regularization_strength",
       ftrl.l2_shrinkage_regularization_strength()},
      {"ftrl.beta", ftrl.beta()},
  };
  for (const auto& [field, value] : non_negative) {
    PSTRAIN_RETURN_IF_ERROR(CheckNonNegative(name, field, value));
  }
  // n^-p of a zero accumulator is infinite for p < 0: the first update
  // would be 0 * inf.
  if (power < 0.0f && ftrl.initial_accumulator_value() == 0.0f) {
    return Invalid(name, "ftrl.initial_accumulator_value", 0,
                   "be > 0 when learning_rate_power < 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckOptimizerConfig(const OptimizerConfig& config,
                                  const FieldName& name) {
  // Checked first: an empty config is missing its kind before its rate.
  if (config.kind_case() == OptimizerConfig::KIND_NOT_SET) {
    return absl::InvalidArgumentError(kNoKind);
  }
  absl::Status s = CheckLearningRate(name, config.learning_rate());
  if (s.ok()) s = CheckNonNegative(name, "weight_decay", config.weight_decay());
  if (!s.ok()) return s;
  switch (config.kind_case()) {
    case OptimizerConfig::kMomentum:
      return CheckUnitInterval(name, "momentum.momentum",
                               config.momentum().momentum());
    case OptimizerConfig::kAdagrad:
      s = CheckNonNegative(name, "adagrad.initial_accumulator_value",
                           config.adagrad().initial_accumulator_value());
      if (!s.ok()) return s;
      return CheckNonNegative(name, "adagrad.epsilon",
                              config.adagrad().epsilon());
    case OptimizerConfig::kAdam:
      s = CheckUnitInterval(name, "adam.beta_1", config.adam().beta_1());
      if (s.ok()) {
        s = CheckUnitInterval(name, "adam.beta_2", config.adam().beta_2());
      }
      if (!s.ok()) return s;
      return CheckNonNegative(name, "adam.epsilon", config.adam().epsilon());
    case OptimizerConfig::kLazyAdam:
      s = CheckUnitInterval(name, "lazy_adam.beta_1",
                            config.lazy_adam().beta_1());
      if (s.ok()) {
        s = CheckUnitInterval(name, "lazy_adam.beta_2",
                              config.lazy_adam().beta_2());
      }
      if (!s.ok()) return s;
      return CheckNonNegative(name, "lazy_adam.epsilon",
                              config.lazy_adam().epsilon());
    case OptimizerConfig::kFtrl:
      return CheckFtrl(name, config.ftrl());
    case OptimizerConfig::kSgd:
    case OptimizerConfig::KIND_NOT_SET:
      break;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(
    const OptimizerConfig& config) {
  if (absl::Status s = CheckOptimizerConfig(config,
                                            [](absl::string_view field) {
                                              return absl::StrCat("optimizer.",
                                                                  field);
                                            });
      !s.ok()) {
    return s;
  }
  const float lr = static_cast<float>(config.learning_rate());
  const float wd = config.weight_decay();
  switch (config.kind_case()) {
    case OptimizerConfig::kSgd:
      return std::make_unique<Sgd>(lr, wd);
    case OptimizerConfig::kMomentum:
      return std::make_unique<Momentum>(lr, wd, config.momentum().momentum(),
                                        config.momentum().nesterov());
    case OptimizerConfig::kAdagrad:
      return std::make_unique<Adagrad>(
          lr, wd, config.adagrad().initial_accumulator_value(),
          config.adagrad().epsilon(), config.adagrad().epsilon_outside_sqrt());
    case OptimizerConfig::kAdam:
      // Adam takes the rate as a double (its bias correction is computed in
      // double).
      return std::make_unique<Adam>(
          config.learning_rate(), wd, config.adam().beta_1(),
          config.adam().beta_2(), config.adam().epsilon());
    case OptimizerConfig::kLazyAdam:
      return std::make_unique<LazyAdam>(
          config.learning_rate(), wd, config.lazy_adam().beta_1(),
          config.lazy_adam().beta_2(), config.lazy_adam().epsilon());
    case OptimizerConfig::kFtrl:
      return std::make_unique<Ftrl>(config.learning_rate(), wd, config.ftrl());
    case OptimizerConfig::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(kNoKind);
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateMovingAverage(
    float momentum) {
  if (!(momentum >= 0 && momentum < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "moving_average.momentum: ", momentum, " must be in [0, 1)"));
  }
  return std::make_unique<MovingAverage>(momentum);
}

}  // namespace ps
}  // namespace pstrain

#include "ps/optimizer.h"

#include <cmath>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/base/macros.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace ps {
namespace {

// Calls step(i, g_eff) for every element, where g_eff = g[i] + weight_decay *
// w[i], read before step updates w[i]. The decay test is made once per call,
// not per element, so both loops stay branch-free; `step` is a lambda, inlined.
template <typename Step>
inline void ForEachElement(absl::Span<float> w, absl::Span<const float> g,
                           float weight_decay, Step step) {
  ABSL_ASSERT(g.size() == w.size());
  const float* gp = g.data();
  const float* wp = w.data();
  const size_t n = w.size();
  if (weight_decay == 0.0f) {
    for (size_t i = 0; i < n; ++i) step(i, gp[i]);
  } else {
    for (size_t i = 0; i < n; ++i) step(i, gp[i] + weight_decay * wp[i]);
  }
}

class Sgd final : public Optimizer {
 public:
  Sgd(float lr, float weight_decay) : lr_(lr), weight_decay_(weight_decay) {}

  int NumSlots() const override { return 0; }
  std::string SlotName(int i) const override { return ""; }
  float SlotInitialValue(int i) const override { return 0.0f; }

  void Apply(absl::Span<float> w, absl::Span<const float> g,
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

  void Apply(absl::Span<float> w, absl::Span<const float> g,
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
          float epsilon)
      : lr_(lr),
        weight_decay_(weight_decay),
        initial_accumulator_value_(initial_accumulator_value),
        epsilon_(epsilon) {}

  int NumSlots() const override { return 1; }
  std::string SlotName(int i) const override { return "accumulator"; }
  float SlotInitialValue(int i) const override {
    return initial_accumulator_value_;
  }

  void Apply(absl::Span<float> w, absl::Span<const float> g,
             absl::Span<float* const> slots, int64_t t) const override {
    ABSL_ASSERT(slots.size() == 1);
    float* wp = w.data();
    float* a = slots[0];
    const float lr = lr_;
    const float eps = epsilon_;
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

  void Apply(absl::Span<float> w, absl::Span<const float> g,
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

constexpr char kNoKind[] =
    "optimizer: no kind set (expected sgd, momentum, adagrad or adam)";

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
  void Apply(absl::Span<float> w, absl::Span<const float> g,
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
          config.adagrad().epsilon());
    case OptimizerConfig::kAdam:
      // Adam takes the rate as a double (its bias correction is computed in
      // double).
      return std::make_unique<Adam>(
          config.learning_rate(), wd, config.adam().beta_1(),
          config.adam().beta_2(), config.adam().epsilon());
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

#include "ps/optimizer.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace ps {
namespace {

// Each optimizer is run for kSteps updates of kElements elements and compared
// with a reference written here in double precision, straight from the
// textbook formulas (a scalar loop, no shared code with optimizer.cc). The
// optimizer works in float, so they agree to within
// kTolerance * (1 + |expected|): 1e-6 absolute plus 1e-6 relative.
constexpr int kSteps = 5;
constexpr int kElements = 7;
constexpr double kTolerance = 1e-6;

// Varied signs and magnitudes, one zero.
std::vector<float> InitialWeights() {
  return {1.5f, -0.75f, 0.0f, 2.25f, -3.0f, 0.125f, 0.8f};
}

// Gradient of element `i` at 1-based step `t`: changes sign and size from
// step to step; element 2 gets an exact zero at step 2.
float Gradient(int t, int i) {
  if (t == 2 && i == 2) return 0.0f;
  return static_cast<float>(std::sin(0.9 * i + 1.7 * t) * (1.0 + 0.3 * i));
}

void ExpectNear(absl::Span<const float> got, const std::vector<double>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], kTolerance * (1.0 + std::fabs(want[i])))
        << what << "[" << i << "]";
  }
}

// What the optimizer left after kSteps updates: weights and slots.
struct Trace {
  std::vector<float> w;
  std::vector<std::vector<float>> slots;
};

std::unique_ptr<Optimizer> MustCreate(const OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config);
  EXPECT_TRUE(opt.ok()) << opt.status();
  if (!opt.ok()) return nullptr;
  return *std::move(opt);
}

Trace RunOptimizer(const OptimizerConfig& config) {
  Trace trace;
  std::unique_ptr<Optimizer> opt = MustCreate(config);
  if (opt == nullptr) return trace;
  trace.w = InitialWeights();
  std::vector<float*> slot_ptrs;
  for (int s = 0; s < opt->NumSlots(); ++s) {
    trace.slots.emplace_back(kElements, opt->SlotInitialValue(s));
  }
  for (std::vector<float>& slot : trace.slots) slot_ptrs.push_back(slot.data());
  for (int t = 1; t <= kSteps; ++t) {
    std::vector<float> g(kElements);
    for (int i = 0; i < kElements; ++i) g[i] = Gradient(t, i);
    opt->Apply(absl::MakeSpan(trace.w), g, slot_ptrs, t);
  }
  return trace;
}

// The reference's state: weights and up to two slots.
struct Reference {
  std::vector<double> w;
  std::vector<double> s0;
  std::vector<double> s1;
};

Reference StartReference(double s0_init) {
  Reference ref;
  for (float w : InitialWeights()) ref.w.push_back(w);
  ref.s0.assign(kElements, s0_init);
  ref.s1.assign(kElements, 0.0);
  return ref;
}

Reference ReferenceSgd(double lr, double wd) {
  Reference ref = StartReference(0.0);
  for (int t = 1; t <= kSteps; ++t) {
    for (int i = 0; i < kElements; ++i) {
      double g = Gradient(t, i) + wd * ref.w[i];
      ref.w[i] = ref.w[i] - lr * g;
    }
  }
  return ref;
}

// s0 is the velocity.
Reference ReferenceMomentum(double lr, double mu, bool nesterov, double wd) {
  Reference ref = StartReference(0.0);
  for (int t = 1; t <= kSteps; ++t) {
    for (int i = 0; i < kElements; ++i) {
      double g = Gradient(t, i) + wd * ref.w[i];
      double velocity = mu * ref.s0[i] - lr * g;
      ref.s0[i] = velocity;
      if (nesterov) {
        ref.w[i] = ref.w[i] + mu * velocity - lr * g;
      } else {
        ref.w[i] = ref.w[i] + velocity;
      }
    }
  }
  return ref;
}

// s0 is the accumulator.
Reference ReferenceAdagrad(double lr, double init, double eps, double wd) {
  Reference ref = StartReference(init);
  for (int t = 1; t <= kSteps; ++t) {
    for (int i = 0; i < kElements; ++i) {
      double g = Gradient(t, i) + wd * ref.w[i];
      ref.s0[i] = ref.s0[i] + g * g;
      ref.w[i] = ref.w[i] - lr * g / std::sqrt(ref.s0[i] + eps);
    }
  }
  return ref;
}

// s0 is m, s1 is v. Kingma & Ba's form with Keras's epsilon placement: the
// bias corrections fold into the step size.
Reference ReferenceAdam(double lr, double b1, double b2, double eps,
                        double wd) {
  Reference ref = StartReference(0.0);
  for (int t = 1; t <= kSteps; ++t) {
    double lr_t = lr * std::sqrt(1.0 - std::pow(b2, t)) / (1.0 - std::pow(b1, t));
    for (int i = 0; i < kElements; ++i) {
      double g = Gradient(t, i) + wd * ref.w[i];
      ref.s0[i] = b1 * ref.s0[i] + (1.0 - b1) * g;
      ref.s1[i] = b2 * ref.s1[i] + (1.0 - b2) * g * g;
      ref.w[i] = ref.w[i] - lr_t * ref.s0[i] / (std::sqrt(ref.s1[i]) + eps);
    }
  }
  return ref;
}

OptimizerConfig SgdConfig(double lr, float wd = 0.0f) {
  OptimizerConfig config;
  config.mutable_sgd();
  config.set_learning_rate(lr);
  config.set_weight_decay(wd);
  return config;
}

OptimizerConfig MomentumConfig(double lr, float momentum, bool nesterov,
                               float wd = 0.0f) {
  OptimizerConfig config;
  config.mutable_momentum()->set_momentum(momentum);
  config.mutable_momentum()->set_nesterov(nesterov);
  config.set_learning_rate(lr);
  config.set_weight_decay(wd);
  return config;
}

OptimizerConfig AdagradConfig(double lr, float init, float eps,
                              float wd = 0.0f) {
  OptimizerConfig config;
  config.mutable_adagrad()->set_initial_accumulator_value(init);
  config.mutable_adagrad()->set_epsilon(eps);
  config.set_learning_rate(lr);
  config.set_weight_decay(wd);
  return config;
}

OptimizerConfig AdamConfig(double lr, float b1, float b2, float eps,
                           float wd = 0.0f) {
  OptimizerConfig config;
  config.mutable_adam()->set_beta_1(b1);
  config.mutable_adam()->set_beta_2(b2);
  config.mutable_adam()->set_epsilon(eps);
  config.set_learning_rate(lr);
  config.set_weight_decay(wd);
  return config;
}

// One update of a single element from fresh slots; returns the new weight.
float ApplyOnce(const OptimizerConfig& config, float w, float g,
                int64_t t = 1) {
  std::unique_ptr<Optimizer> opt = MustCreate(config);
  if (opt == nullptr) return std::numeric_limits<float>::quiet_NaN();
  std::vector<float> slots(opt->NumSlots());
  std::vector<float*> slot_ptrs;
  for (int s = 0; s < opt->NumSlots(); ++s) {
    slots[s] = opt->SlotInitialValue(s);
  }
  for (float& slot : slots) slot_ptrs.push_back(&slot);
  opt->Apply(absl::MakeSpan(&w, 1), absl::MakeConstSpan(&g, 1), slot_ptrs, t);
  return w;
}

// --- Hand-computed values, independent of the references above. ---

TEST(Optimizer, SgdStepsAgainstTheGradient) {
  EXPECT_FLOAT_EQ(ApplyOnce(SgdConfig(0.1), 1.0f, 0.5f), 0.95f);
  EXPECT_FLOAT_EQ(ApplyOnce(SgdConfig(0.1), -2.0f, -1.0f), -1.9f);
}

TEST(Optimizer, WeightDecayAddsToTheGradientFromTheOldWeight) {
  // g_eff = 1 + 0.5 * 2 = 2; w = 2 - 0.1 * 2.
  EXPECT_FLOAT_EQ(ApplyOnce(SgdConfig(0.1, 0.5f), 2.0f, 1.0f), 1.8f);
  // A zero gradient still shrinks the weight: 4 - 0.1 * (0.25 * 4).
  EXPECT_FLOAT_EQ(ApplyOnce(SgdConfig(0.1, 0.25f), 4.0f, 0.0f), 3.9f);
}

TEST(Optimizer, MomentumAccumulatesVelocity) {
  std::unique_ptr<Optimizer> opt = MustCreate(MomentumConfig(0.1, 0.9f, false));
  ASSERT_NE(opt, nullptr);
  float w = 1.0f, g = 1.0f, m = 0.0f;
  float* slots[] = {&m};
  opt->Apply(absl::MakeSpan(&w, 1), absl::MakeConstSpan(&g, 1), slots, 1);
  EXPECT_FLOAT_EQ(m, -0.1f);
  EXPECT_FLOAT_EQ(w, 0.9f);
  opt->Apply(absl::MakeSpan(&w, 1), absl::MakeConstSpan(&g, 1), slots, 2);
  EXPECT_FLOAT_EQ(m, -0.19f);  // 0.9 * -0.1 - 0.1
  EXPECT_FLOAT_EQ(w, 0.71f);
}

TEST(Optimizer, NesterovLooksAhead) {
  std::unique_ptr<Optimizer> opt = MustCreate(MomentumConfig(0.1, 0.9f, true));
  ASSERT_NE(opt, nullptr);
  float w = 1.0f, g = 1.0f, m = 0.0f;
  float* slots[] = {&m};
  opt->Apply(absl::MakeSpan(&w, 1), absl::MakeConstSpan(&g, 1), slots, 1);
  EXPECT_FLOAT_EQ(m, -0.1f);
  EXPECT_FLOAT_EQ(w, 0.81f);  // 1 + 0.9 * -0.1 - 0.1
}

TEST(Optimizer, AdagradDividesByRootOfAccumulator) {
  // a = 0.75 + 0.25 = 1; w = 1 - 0.1 * 0.5 / 1.
  EXPECT_FLOAT_EQ(ApplyOnce(AdagradConfig(0.1, 0.75f, 0.0f), 1.0f, 0.5f),
                  0.95f);
  // Epsilon is inside the root: a = 0 + 9 = 9, sqrt(9 + 7) = 4.
  EXPECT_FLOAT_EQ(ApplyOnce(AdagradConfig(0.2, 0.0f, 7.0f), 1.0f, 3.0f),
                  0.85f);  // 1 - 0.2 * 3 / 4
}

TEST(Optimizer, AdamFirstStepIsLearningRateTimesSignWithoutEpsilon) {
  // t = 1: m = (1 - b1) g, v = (1 - b2) g^2, so the bias-corrected step is
  // lr * g / |g| whatever g's size.
  const OptimizerConfig config = AdamConfig(0.1, 0.9f, 0.999f, 0.0f);
  EXPECT_NEAR(ApplyOnce(config, 1.0f, 0.5f), 0.9, 1e-6);
  EXPECT_NEAR(ApplyOnce(config, 1.0f, -3.0f), 1.1, 1e-6);
  EXPECT_NEAR(ApplyOnce(config, 1.0f, 1e-4f), 0.9, 1e-6);
}

TEST(Optimizer, AdamFirstStepPutsEpsilonOutsideTheBiasCorrectedRoot) {
  // t = 1: step = lr * g / (|g| + eps / sqrt(1 - b2)).
  const float b2 = 0.999f;
  const float eps = 1e-7f;
  const float g = 1e-5f;
  const double want = 1.0 - 0.1 * g / (g + eps / std::sqrt(1.0 - b2));
  EXPECT_NEAR(ApplyOnce(AdamConfig(0.1, 0.9f, b2, eps), 1.0f, g), want, 1e-6);
}

TEST(Optimizer, AdamBiasCorrectionUsesTheGivenStepCount) {
  // Same state and gradient at t = 1 and t = 100: only the correction
  // lr * sqrt(1 - b2^t) / (1 - b1^t) differs; m / sqrt(v) = 0.1 / sqrt(0.001)
  // = sqrt(10) for fresh slots.
  const double b1 = 0.9f, b2 = 0.999f;
  const OptimizerConfig config = AdamConfig(0.01, 0.9f, 0.999f, 0.0f);
  for (int64_t t : {1, 2, 100}) {
    const double correction =
        std::sqrt(1.0 - std::pow(b2, t)) / (1.0 - std::pow(b1, t));
    const double want =
        1.0 - 0.01 * correction * (1.0 - b1) / std::sqrt(1.0 - b2);
    EXPECT_NEAR(ApplyOnce(config, 1.0f, 2.0f, t), want, 1e-6) << "t=" << t;
  }
}

// --- Several steps against the double-precision references. ---

TEST(Optimizer, SgdMatchesReference) {
  Trace got = RunOptimizer(SgdConfig(0.1));
  ExpectNear(got.w, ReferenceSgd(0.1, 0.0).w, "w");
}

TEST(Optimizer, SgdWithWeightDecayMatchesReference) {
  Trace got = RunOptimizer(SgdConfig(0.1, 0.05f));
  ExpectNear(got.w, ReferenceSgd(0.1, double{0.05f}).w, "w");
}

TEST(Optimizer, MomentumMatchesReference) {
  Trace got = RunOptimizer(MomentumConfig(0.05, 0.9f, false));
  Reference want = ReferenceMomentum(0.05, double{0.9f}, false, 0.0);
  ExpectNear(got.w, want.w, "w");
  ASSERT_EQ(got.slots.size(), 1u);
  ExpectNear(got.slots[0], want.s0, "momentum");
}

TEST(Optimizer, NesterovMatchesReference) {
  Trace got = RunOptimizer(MomentumConfig(0.05, 0.9f, true));
  Reference want = ReferenceMomentum(0.05, double{0.9f}, true, 0.0);
  ExpectNear(got.w, want.w, "w");
  ASSERT_EQ(got.slots.size(), 1u);
  ExpectNear(got.slots[0], want.s0, "momentum");
}

TEST(Optimizer, NesterovWithWeightDecayMatchesReference) {
  Trace got = RunOptimizer(MomentumConfig(0.05, 0.8f, true, 0.01f));
  Reference want =
      ReferenceMomentum(0.05, double{0.8f}, true, double{0.01f});
  ExpectNear(got.w, want.w, "w");
  ASSERT_EQ(got.slots.size(), 1u);
  ExpectNear(got.slots[0], want.s0, "momentum");
}

TEST(Optimizer, AdagradWithInitialAccumulatorMatchesReference) {
  Trace got = RunOptimizer(AdagradConfig(0.1, 0.1f, 1e-7f));
  Reference want =
      ReferenceAdagrad(0.1, double{0.1f}, double{1e-7f}, 0.0);
  ExpectNear(got.w, want.w, "w");
  ASSERT_EQ(got.slots.size(), 1u);
  ExpectNear(got.slots[0], want.s0, "accumulator");
}

TEST(Optimizer, AdagradWithWeightDecayMatchesReference) {
  Trace got = RunOptimizer(AdagradConfig(0.1, 0.5f, 1e-3f, 0.02f));
  Reference want = ReferenceAdagrad(0.1, double{0.5f}, double{1e-3f},
                                    double{0.02f});
  ExpectNear(got.w, want.w, "w");
  ASSERT_EQ(got.slots.size(), 1u);
  ExpectNear(got.slots[0], want.s0, "accumulator");
}

TEST(Optimizer, AdamMatchesReferenceWithBiasCorrection) {
  Trace got = RunOptimizer(AdamConfig(0.01, 0.9f, 0.999f, 1e-7f));
  Reference want = ReferenceAdam(0.01, double{0.9f}, double{0.999f},
                                 double{1e-7f}, 0.0);
  ExpectNear(got.w, want.w, "w");
  ASSERT_EQ(got.slots.size(), 2u);
  ExpectNear(got.slots[0], want.s0, "m");
  ExpectNear(got.slots[1], want.s1, "v");
}

TEST(Optimizer, AdamWithWeightDecayMatchesReference) {
  Trace got = RunOptimizer(AdamConfig(0.02, 0.8f, 0.99f, 1e-3f, 0.1f));
  Reference want = ReferenceAdam(0.02, double{0.8f}, double{0.99f},
                                 double{1e-3f}, double{0.1f});
  ExpectNear(got.w, want.w, "w");
  ASSERT_EQ(got.slots.size(), 2u);
  ExpectNear(got.slots[0], want.s0, "m");
  ExpectNear(got.slots[1], want.s1, "v");
}

// --- Slots, spans. ---

TEST(Optimizer, DeclaresSlotsWithNamesAndInitialValues) {
  std::unique_ptr<Optimizer> sgd = MustCreate(SgdConfig(0.1));
  ASSERT_NE(sgd, nullptr);
  EXPECT_EQ(sgd->NumSlots(), 0);

  std::unique_ptr<Optimizer> momentum =
      MustCreate(MomentumConfig(0.1, 0.9f, true));
  ASSERT_NE(momentum, nullptr);
  ASSERT_EQ(momentum->NumSlots(), 1);
  EXPECT_EQ(momentum->SlotName(0), "momentum");
  EXPECT_EQ(momentum->SlotInitialValue(0), 0.0f);

  std::unique_ptr<Optimizer> adagrad =
      MustCreate(AdagradConfig(0.1, 0.25f, 1e-7f));
  ASSERT_NE(adagrad, nullptr);
  ASSERT_EQ(adagrad->NumSlots(), 1);
  EXPECT_EQ(adagrad->SlotName(0), "accumulator");
  EXPECT_EQ(adagrad->SlotInitialValue(0), 0.25f);

  std::unique_ptr<Optimizer> adam =
      MustCreate(AdamConfig(0.1, 0.9f, 0.999f, 1e-7f));
  ASSERT_NE(adam, nullptr);
  ASSERT_EQ(adam->NumSlots(), 2);
  EXPECT_EQ(adam->SlotName(0), "m");
  EXPECT_EQ(adam->SlotName(1), "v");
  EXPECT_EQ(adam->SlotInitialValue(0), 0.0f);
  EXPECT_EQ(adam->SlotInitialValue(1), 0.0f);
}

std::vector<OptimizerConfig> EveryKind() {
  return {SgdConfig(0.1, 0.01f), MomentumConfig(0.1, 0.9f, false, 0.01f),
          MomentumConfig(0.1, 0.9f, true, 0.01f),
          AdagradConfig(0.1, 0.1f, 1e-7f, 0.01f),
          AdamConfig(0.1, 0.9f, 0.999f, 1e-7f, 0.01f)};
}

TEST(Optimizer, ApplyOnEmptySpanTouchesNothing) {
  for (const OptimizerConfig& config : EveryKind()) {
    std::unique_ptr<Optimizer> opt = MustCreate(config);
    ASSERT_NE(opt, nullptr);
    std::vector<float> w = {1.0f, 2.0f};
    std::vector<float> g = {3.0f, 4.0f};
    std::vector<std::vector<float>> slots(opt->NumSlots(), {5.0f, 6.0f});
    std::vector<float*> slot_ptrs;
    for (std::vector<float>& slot : slots) slot_ptrs.push_back(slot.data());
    opt->Apply(absl::MakeSpan(w).subspan(0, 0),
               absl::MakeConstSpan(g).subspan(0, 0), slot_ptrs, 1);
    EXPECT_EQ(w, (std::vector<float>{1.0f, 2.0f})) << config.DebugString();
    for (const std::vector<float>& slot : slots) {
      EXPECT_EQ(slot, (std::vector<float>{5.0f, 6.0f})) << config.DebugString();
    }
  }
}

TEST(Optimizer, ApplyUpdatesOnlyTheGivenRun) {
  // As for one embedding row in the middle of a table: elements 2 and 3.
  for (const OptimizerConfig& config : EveryKind()) {
    std::unique_ptr<Optimizer> opt = MustCreate(config);
    ASSERT_NE(opt, nullptr);
    std::vector<float> w = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
    const std::vector<float> g = {0.5f, -0.5f};
    std::vector<std::vector<float>> slots;
    std::vector<float*> slot_ptrs;
    for (int s = 0; s < opt->NumSlots(); ++s) {
      slots.emplace_back(6, opt->SlotInitialValue(s));
    }
    for (std::vector<float>& slot : slots) slot_ptrs.push_back(&slot[2]);
    opt->Apply(absl::MakeSpan(w).subspan(2, 2), g, slot_ptrs, 1);
    EXPECT_LT(w[2], 3.0f) << config.DebugString();
    EXPECT_GT(w[3], 4.0f) << config.DebugString();
    for (int i : {0, 1, 4, 5}) {
      EXPECT_EQ(w[i], static_cast<float>(i + 1)) << config.DebugString();
      for (int s = 0; s < opt->NumSlots(); ++s) {
        EXPECT_EQ(slots[s][i], opt->SlotInitialValue(s))
            << config.DebugString();
      }
    }
  }
}

// --- Validation. ---

void ExpectInvalid(const OptimizerConfig& config, const std::string& message) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config);
  ASSERT_FALSE(opt.ok()) << config.DebugString();
  EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(opt.status().message(), message);
}

TEST(Optimizer, ScaledGradientReadsUnalignedBytesTimesItsScale) {
  // As a push is applied: the gradient's bytes at an odd address in the
  // received buffer, scaled by 1 / batch as they are read. Each update must
  // equal the one from aligned floats scaled beforehand, bit for bit.
  constexpr int kN = 37;  // past any vector width, with a remainder
  constexpr float kInverseBatch = 1.0f / 3.0f;
  for (const OptimizerConfig& config : EveryKind()) {
    std::unique_ptr<Optimizer> opt = MustCreate(config);
    ASSERT_NE(opt, nullptr);
    std::vector<float> g(kN), scaled(kN);
    for (int i = 0; i < kN; ++i) {
      g[i] = 0.1f * static_cast<float>(i - 18) + 0.01f;
      scaled[i] = g[i] * kInverseBatch;
    }
    std::vector<char> bytes(1 + 4 * kN);
    std::memcpy(bytes.data() + 1, g.data(), 4 * kN);
    const std::vector<float> initial(kN, 0.5f);
    std::vector<float> w_fused = initial, w_scaled = initial;
    std::vector<std::vector<float>> slots_fused, slots_scaled;
    for (int s = 0; s < opt->NumSlots(); ++s) {
      slots_fused.emplace_back(kN, opt->SlotInitialValue(s));
      slots_scaled.emplace_back(kN, opt->SlotInitialValue(s));
    }
    std::vector<float*> fused_ptrs, scaled_ptrs;
    for (int s = 0; s < opt->NumSlots(); ++s) {
      fused_ptrs.push_back(slots_fused[s].data());
      scaled_ptrs.push_back(slots_scaled[s].data());
    }
    for (int t = 1; t <= 3; ++t) {
      opt->Apply(absl::MakeSpan(w_fused),
                 ScaledGradient(bytes.data() + 1, kN, kInverseBatch),
                 fused_ptrs, t);
      opt->Apply(absl::MakeSpan(w_scaled), scaled, scaled_ptrs, t);
    }
    EXPECT_EQ(w_fused, w_scaled) << config.DebugString();
    EXPECT_EQ(slots_fused, slots_scaled) << config.DebugString();
    EXPECT_NE(w_fused, initial) << config.DebugString();
  }
}

TEST(Optimizer, RefusesConfigWithoutKind) {
  OptimizerConfig config;
  config.set_learning_rate(0.1);
  ExpectInvalid(
      config,
      "optimizer: no kind set (expected sgd, momentum, adagrad, adam, "
      "ftrl or lazy_adam)");
  ExpectInvalid(
      OptimizerConfig(),
      "optimizer: no kind set (expected sgd, momentum, adagrad, adam, "
      "ftrl or lazy_adam)");
}

TEST(Optimizer, RefusesBadLearningRate) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ExpectInvalid(SgdConfig(-0.1), "optimizer.learning_rate: -0.1 must be > 0");
  ExpectInvalid(SgdConfig(0.0), "optimizer.learning_rate: 0 must be > 0");
  ExpectInvalid(AdamConfig(0.0, 0.9f, 0.999f, 1e-7f),
                "optimizer.learning_rate: 0 must be > 0");
  ExpectInvalid(SgdConfig(inf), "optimizer.learning_rate: inf must be finite");
  ExpectInvalid(SgdConfig(nan), "optimizer.learning_rate: nan must be finite");
  ExpectInvalid(SgdConfig(1e300),
                "optimizer.learning_rate: 1e+300 must be representable as a "
                "float");
  ExpectInvalid(SgdConfig(1e-50),
                "optimizer.learning_rate: 1e-50 must be representable as a "
                "float");
}

TEST(Optimizer, RefusesBadWeightDecay) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ExpectInvalid(SgdConfig(0.1, -0.5f),
                "optimizer.weight_decay: -0.5 must be >= 0");
  ExpectInvalid(AdamConfig(0.1, 0.9f, 0.999f, 1e-7f, -0.5f),
                "optimizer.weight_decay: -0.5 must be >= 0");
  ExpectInvalid(SgdConfig(0.1, inf),
                "optimizer.weight_decay: inf must be finite");
  ExpectInvalid(SgdConfig(0.1, nan),
                "optimizer.weight_decay: nan must be finite");
}

TEST(Optimizer, RefusesMomentumOutsideUnitInterval) {
  ExpectInvalid(MomentumConfig(0.1, 1.0f, false),
                "optimizer.momentum.momentum: 1 must be in [0, 1)");
  ExpectInvalid(MomentumConfig(0.1, -0.1f, true),
                "optimizer.momentum.momentum: -0.1 must be in [0, 1)");
  ExpectInvalid(
      MomentumConfig(0.1, std::numeric_limits<float>::quiet_NaN(), false),
      "optimizer.momentum.momentum: nan must be in [0, 1)");
}

TEST(Optimizer, RefusesBadAdagradSettings) {
  const float inf = std::numeric_limits<float>::infinity();
  ExpectInvalid(AdagradConfig(0.1, -1.0f, 1e-7f),
                "optimizer.adagrad.initial_accumulator_value: -1 must be >= 0");
  ExpectInvalid(AdagradConfig(0.1, inf, 1e-7f),
                "optimizer.adagrad.initial_accumulator_value: inf must be "
                "finite");
  ExpectInvalid(AdagradConfig(0.1, 0.1f, -1e-7f),
                "optimizer.adagrad.epsilon: -1e-07 must be >= 0");
  ExpectInvalid(AdagradConfig(0.1, 0.1f, inf),
                "optimizer.adagrad.epsilon: inf must be finite");
}

TEST(Optimizer, RefusesBadAdamSettings) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  ExpectInvalid(AdamConfig(0.1, 1.0f, 0.999f, 1e-7f),
                "optimizer.adam.beta_1: 1 must be in [0, 1)");
  ExpectInvalid(AdamConfig(0.1, -0.5f, 0.999f, 1e-7f),
                "optimizer.adam.beta_1: -0.5 must be in [0, 1)");
  ExpectInvalid(AdamConfig(0.1, 0.9f, 1.0f, 1e-7f),
                "optimizer.adam.beta_2: 1 must be in [0, 1)");
  ExpectInvalid(AdamConfig(0.1, 0.9f, nan, 1e-7f),
                "optimizer.adam.beta_2: nan must be in [0, 1)");
  ExpectInvalid(AdamConfig(0.1, 0.9f, 0.999f, -1.0f),
                "optimizer.adam.epsilon: -1 must be >= 0");
  ExpectInvalid(AdamConfig(0.1, 0.9f, 0.999f, inf),
                "optimizer.adam.epsilon: inf must be finite");
}

TEST(Optimizer, AcceptsBoundaryValues) {
  // Zero is allowed for every setting but the learning rate.
  for (const OptimizerConfig& config :
       {SgdConfig(1e-30, 0.0f), MomentumConfig(0.1, 0.0f, true),
        AdagradConfig(0.1, 0.0f, 0.0f), AdamConfig(0.1, 0.0f, 0.0f, 0.0f)}) {
    absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config);
    EXPECT_TRUE(opt.ok()) << config.DebugString() << opt.status();
  }
}

TEST(Optimizer, CheckNamesTheBadFieldAsAsked) {
  const FieldName as_flag = [](absl::string_view field) {
    return std::string("--") + std::string(field.substr(field.rfind('.') + 1));
  };
  EXPECT_EQ(CheckOptimizerConfig(AdamConfig(0.1, 1.5f, 0.999f, 1e-7f), as_flag)
                .message(),
            "--beta_1: 1.5 must be in [0, 1)");
  EXPECT_EQ(CheckOptimizerConfig(SgdConfig(-0.1), as_flag).message(),
            "--learning_rate: -0.1 must be > 0");
  EXPECT_EQ(
      CheckOptimizerConfig(MomentumConfig(0.1, 1.0f, false), as_flag).message(),
      "--momentum: 1 must be in [0, 1)");
  EXPECT_EQ(
      CheckOptimizerConfig(AdagradConfig(0.1, -1.0f, 1e-7f), as_flag).message(),
      "--initial_accumulator_value: -1 must be >= 0");
  EXPECT_TRUE(
      CheckOptimizerConfig(AdamConfig(0.1, 0.9f, 0.999f, 1e-7f), as_flag).ok());
}

}  // namespace
}  // namespace ps
}  // namespace pstrain

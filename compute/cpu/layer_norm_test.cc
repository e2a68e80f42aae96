#include "compute/cpu/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Gradient checks: central differences of sum(dy * y) through the op's own
// Forward, eps 1e-3; max |analytic - numeric| <= 1e-2 * max |numeric|.
constexpr double kEps = 1e-3;
constexpr double kGradientTolerance = 1e-2;

std::unique_ptr<Engine> MakeEngine() {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create({});
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

LayerNormShape Shape(bool center, bool scale) {
  LayerNormShape s;
  s.rows = 6;
  s.width = 7;
  s.epsilon = 1e-3f;
  s.center = center;
  s.scale = scale;
  return s;
}

std::vector<LayerNormShape> Shapes() {
  return {Shape(true, true), Shape(true, false), Shape(false, true),
          Shape(false, false)};
}

// The op's outputs and the double reference of the header's formulas.
struct Reference {
  std::vector<double> y, mean, var, dx, dgamma, dbeta;
};

Reference RefLayerNorm(const LayerNormShape& s, const std::vector<float>& x,
                       const std::vector<float>& gamma,
                       const std::vector<float>& beta,
                       const std::vector<float>& dy) {
  const int64_t w = s.width;
  Reference ref;
  ref.y.resize(x.size());
  ref.dx.resize(x.size());
  ref.dgamma.assign(w, 0.0);
  ref.dbeta.assign(w, 0.0);
  for (int64_t r = 0; r < s.rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < w; ++i) mean += x[r * w + i];
    mean /= w;
    for (int64_t i = 0; i < w; ++i) {
      var += (x[r * w + i] - mean) * (x[r * w + i] - mean);
    }
    var /= w;
    ref.mean.push_back(mean);
    ref.var.push_back(var);
    const double inv_std = 1.0 / std::sqrt(var + s.epsilon);
    std::vector<double> xhat(w), g(w);
    double g_mean = 0, gx_mean = 0;
    for (int64_t i = 0; i < w; ++i) {
      const int64_t k = r * w + i;
      xhat[i] = (x[k] - mean) * inv_std;
      const double gm = s.scale ? gamma[i] : 1.0;
      ref.y[k] = gm * xhat[i] + (s.center ? beta[i] : 0.0);
      g[i] = dy[k] * gm;
      g_mean += g[i] / w;
      gx_mean += g[i] * xhat[i] / w;
      ref.dgamma[i] += dy[k] * xhat[i];
      ref.dbeta[i] += dy[k];
    }
    for (int64_t i = 0; i < w; ++i) {
      ref.dx[r * w + i] = (g[i] - g_mean - xhat[i] * gx_mean) * inv_std;
    }
  }
  return ref;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

struct Buffers {
  std::vector<float> x, gamma, beta, y, dy, dx, dgamma, dbeta;
};

Buffers MakeBuffers(const LayerNormShape& s, float offset) {
  Buffers b;
  const int64_t n = s.rows * s.width;
  b.x = RandomFloats(n, 1, offset - 1.0f, offset + 1.0f);
  b.gamma = RandomFloats(s.width, 2, 0.5f, 1.5f);
  b.beta = RandomFloats(s.width, 3);
  b.dy = RandomFloats(n, 4);
  b.y.resize(n);
  b.dx.resize(n);
  b.dgamma.resize(s.width);
  b.dbeta.resize(s.width);
  return b;
}

float* Or(bool flag, std::vector<float>& v) {
  return flag ? v.data() : nullptr;
}

TEST(LayerNormOp, ForwardAndBackwardMatchDoubleReference) {
  std::unique_ptr<Engine> engine = MakeEngine();
  std::vector<LayerNormShape> shapes = Shapes();
  LayerNormShape wide = Shape(true, true);
  wide.rows = 33;
  wide.width = 300;
  shapes.push_back(wide);
  for (const LayerNormShape& s : shapes) {
    // An offset of 100 checks that the variance does not cancel.
    for (float offset : {0.0f, 100.0f}) {
      SCOPED_TRACE(testing::Message()
                   << "center " << s.center << " scale " << s.scale << " width "
                   << s.width << " offset " << offset);
      absl::StatusOr<std::unique_ptr<LayerNormOp>> op =
          LayerNormOp::Create(s, engine.get());
      ASSERT_TRUE(op.ok()) << op.status();
      Buffers b = MakeBuffers(s, offset);
      ASSERT_EQ((*op)->Forward(b.x.data(), Or(s.scale, b.gamma),
                               Or(s.center, b.beta), b.y.data()),
                absl::OkStatus());
      ASSERT_EQ((*op)->Backward(b.x.data(), Or(s.scale, b.gamma), b.dy.data(),
                                b.dx.data(), Or(s.scale, b.dgamma),
                                Or(s.center, b.dbeta)),
                absl::OkStatus());
      Reference ref = RefLayerNorm(s, b.x, b.gamma, b.beta, b.dy);
      const double tolerance = offset == 0 ? 2e-5 : 2e-4;
      EXPECT_LE(MaxAbsDiff(b.y, ref.y), tolerance);
      EXPECT_LE(MaxAbsDiff((*op)->mean(), ref.mean), 1e-5 * (1 + offset));
      EXPECT_LE(MaxAbsDiff((*op)->variance(), ref.var), 1e-4);
      EXPECT_LE(MaxAbsDiff(b.dx, ref.dx), 10 * tolerance);
      if (s.scale) {
        EXPECT_LE(MaxAbsDiff(b.dgamma, ref.dgamma), 1e-4 * s.rows);
      }
      if (s.center) {
        EXPECT_LE(MaxAbsDiff(b.dbeta, ref.dbeta), 1e-5 * s.rows);
      }
    }
  }
}

TEST(LayerNormOp, GradientsMatchFiniteDifferences) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (const LayerNormShape& s : Shapes()) {
    SCOPED_TRACE(testing::Message()
                 << "center " << s.center << " scale " << s.scale);
    absl::StatusOr<std::unique_ptr<LayerNormOp>> created =
        LayerNormOp::Create(s, engine.get());
    ASSERT_TRUE(created.ok()) << created.status();
    LayerNormOp& op = **created;
    Buffers b = MakeBuffers(s, 0.0f);
    auto loss = [&]() {
      EXPECT_TRUE(op.Forward(b.x.data(), Or(s.scale, b.gamma),
                             Or(s.center, b.beta), b.y.data())
                      .ok());
      return Dot(b.y, b.dy);
    };
    loss();
    ASSERT_EQ(
        op.Backward(b.x.data(), Or(s.scale, b.gamma), b.dy.data(), b.dx.data(),
                    Or(s.scale, b.dgamma), Or(s.center, b.dbeta)),
        absl::OkStatus());
    EXPECT_TRUE(GradientsClose(
        b.dx, NumericGradient(loss, b.x.data(), b.x.size(), kEps),
        kGradientTolerance));
    if (s.scale) {
      EXPECT_TRUE(GradientsClose(
          b.dgamma, NumericGradient(loss, b.gamma.data(), s.width, kEps),
          kGradientTolerance));
    }
    if (s.center) {
      EXPECT_TRUE(GradientsClose(
          b.dbeta, NumericGradient(loss, b.beta.data(), s.width, kEps),
          kGradientTolerance));
    }
  }
}

TEST(LayerNormOp, BackwardWithoutDxGivesTheSameParameterGradients) {
  std::unique_ptr<Engine> engine = MakeEngine();
  LayerNormShape s = Shape(true, true);
  absl::StatusOr<std::unique_ptr<LayerNormOp>> op =
      LayerNormOp::Create(s, engine.get());
  ASSERT_TRUE(op.ok()) << op.status();
  Buffers b = MakeBuffers(s, 0.0f);
  ASSERT_EQ(
      (*op)->Forward(b.x.data(), b.gamma.data(), b.beta.data(), b.y.data()),
      absl::OkStatus());
  ASSERT_EQ((*op)->Backward(b.x.data(), b.gamma.data(), b.dy.data(),
                            b.dx.data(), b.dgamma.data(), b.dbeta.data()),
            absl::OkStatus());
  std::vector<float> dgamma(s.width), dbeta(s.width);
  ASSERT_EQ((*op)->Backward(b.x.data(), b.gamma.data(), b.dy.data(),
                            /*dx=*/nullptr, dgamma.data(), dbeta.data()),
            absl::OkStatus());
  for (int64_t i = 0; i < s.width; ++i) {
    EXPECT_NEAR(dgamma[i], b.dgamma[i], 1e-5);
    EXPECT_NEAR(dbeta[i], b.dbeta[i], 1e-5);
  }
}

TEST(LayerNormOp, BackwardBeforeForwardFails) {
  std::unique_ptr<Engine> engine = MakeEngine();
  LayerNormShape s = Shape(false, false);
  absl::StatusOr<std::unique_ptr<LayerNormOp>> op =
      LayerNormOp::Create(s, engine.get());
  ASSERT_TRUE(op.ok()) << op.status();
  Buffers b = MakeBuffers(s, 0.0f);
  EXPECT_EQ((*op)
                ->Backward(b.x.data(), nullptr, b.dy.data(), b.dx.data(),
                           nullptr, nullptr)
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(LayerNormOp, RefusesParametersThatDoNotMatchTheFlags) {
  std::unique_ptr<Engine> engine = MakeEngine();
  LayerNormShape s = Shape(/*center=*/false, /*scale=*/true);
  absl::StatusOr<std::unique_ptr<LayerNormOp>> op =
      LayerNormOp::Create(s, engine.get());
  ASSERT_TRUE(op.ok()) << op.status();
  Buffers b = MakeBuffers(s, 0.0f);
  EXPECT_EQ((*op)->Forward(b.x.data(), nullptr, nullptr, b.y.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*op)
                ->Forward(b.x.data(), b.gamma.data(), b.beta.data(), b.y.data())
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LayerNormOp, CreateRefusesBadShapes) {
  std::unique_ptr<Engine> engine = MakeEngine();
  LayerNormShape s = Shape(true, true);
  s.width = 0;
  absl::Status status = LayerNormOp::Create(s, engine.get()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "LayerNorm: width must be positive, got 0");
  s = Shape(true, true);
  s.rows = -1;
  EXPECT_EQ(LayerNormOp::Create(s, engine.get()).status().message(),
            "LayerNorm: rows must be positive, got -1");
  s = Shape(true, true);
  s.epsilon = -1e-3f;
  status = LayerNormOp::Create(s, engine.get()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "LayerNorm: epsilon must be finite and non-negative, got -0.001");
  s.epsilon = NAN;
  EXPECT_EQ(LayerNormOp::Create(s, engine.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#include "compute/cpu/batch_norm.h"

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
// ForwardTraining, eps 1e-3; max |analytic - numeric| <= 1e-2 * max
// |numeric|.
constexpr double kEps = 1e-3;
constexpr double kGradientTolerance = 1e-2;

std::unique_ptr<Engine> MakeEngine() {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create({});
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

BatchNormShape Shape(bool center, bool scale) {
  BatchNormShape s;
  s.rows = 10;  // E.g. batch 2 of 5 positions.
  s.channels = 3;
  s.epsilon = 1e-3f;
  s.center = center;
  s.scale = scale;
  return s;
}

std::vector<BatchNormShape> Shapes() {
  return {Shape(true, true), Shape(true, false), Shape(false, true),
          Shape(false, false)};
}

struct Reference {
  std::vector<double> y, mean, var, dx, dgamma, dbeta;
};

// The header's formulas in double. With `moving` statistics (inference) they
// replace the batch's, and no gradient is computed.
Reference RefBatchNorm(const BatchNormShape& s, const std::vector<float>& x,
                       const std::vector<float>& gamma,
                       const std::vector<float>& beta,
                       const std::vector<float>& dy,
                       const std::vector<float>* moving_mean = nullptr,
                       const std::vector<float>* moving_var = nullptr) {
  const int64_t rows = s.rows, ch = s.channels;
  Reference ref;
  ref.y.resize(x.size());
  ref.dx.resize(x.size());
  for (int64_t c = 0; c < ch; ++c) {
    double mean = 0, var = 0;
    for (int64_t r = 0; r < rows; ++r) mean += x[r * ch + c];
    mean /= rows;
    for (int64_t r = 0; r < rows; ++r) {
      var += (x[r * ch + c] - mean) * (x[r * ch + c] - mean);
    }
    var /= rows;
    ref.mean.push_back(mean);
    ref.var.push_back(var);
    if (moving_mean != nullptr) {
      mean = (*moving_mean)[c];
      var = (*moving_var)[c];
    }
    const double inv_std = 1.0 / std::sqrt(var + s.epsilon);
    const double g = s.scale ? gamma[c] : 1.0;
    double dgamma = 0, dbeta = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t k = r * ch + c;
      const double xhat = (x[k] - mean) * inv_std;
      ref.y[k] = g * xhat + (s.center ? beta[c] : 0.0);
      dgamma += dy[k] * xhat;
      dbeta += dy[k];
    }
    ref.dgamma.push_back(dgamma);
    ref.dbeta.push_back(dbeta);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t k = r * ch + c;
      const double xhat = (x[k] - mean) * inv_std;
      ref.dx[k] = g * inv_std * (dy[k] - dbeta / rows - xhat * dgamma / rows);
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
  std::vector<float> x, gamma, beta, y, dy, dx, dgamma, dbeta, mean, var;
};

Buffers MakeBuffers(const BatchNormShape& s, float offset) {
  Buffers b;
  const int64_t n = s.rows * s.channels;
  b.x = RandomFloats(n, 1, offset - 1.0f, offset + 1.0f);
  b.gamma = RandomFloats(s.channels, 2, 0.5f, 1.5f);
  b.beta = RandomFloats(s.channels, 3);
  b.dy = RandomFloats(n, 4);
  b.y.resize(n);
  b.dx.resize(n);
  for (std::vector<float>* v : {&b.dgamma, &b.dbeta, &b.mean, &b.var}) {
    v->resize(s.channels);
  }
  return b;
}

float* Or(bool flag, std::vector<float>& v) {
  return flag ? v.data() : nullptr;
}

absl::Status Train(BatchNormOp& op, Buffers& b) {
  const BatchNormShape& s = op.shape();
  return op.ForwardTraining(b.x.data(), Or(s.scale, b.gamma),
                            Or(s.center, b.beta), b.y.data(), b.mean.data(),
                            b.var.data());
}

absl::Status Backward(BatchNormOp& op, Buffers& b, float* dx) {
  const BatchNormShape& s = op.shape();
  return op.Backward(b.x.data(), Or(s.scale, b.gamma), b.dy.data(), dx,
                     Or(s.scale, b.dgamma), Or(s.center, b.dbeta));
}

TEST(BatchNormOp, TrainingMatchesDoubleReference) {
  std::unique_ptr<Engine> engine = MakeEngine();
  std::vector<BatchNormShape> shapes = Shapes();
  // Enough rows for float32 sums to drift: the statistics must not.
  BatchNormShape large = Shape(true, true);
  large.rows = 8 * 28 * 28;
  large.channels = 16;
  shapes.push_back(large);
  BatchNormShape one_row = Shape(true, true);
  one_row.rows = 1;
  shapes.push_back(one_row);
  for (const BatchNormShape& s : shapes) {
    // Offsets check that the variance does not cancel; x - mean itself
    // carries float rounding of about 1e-7 * offset.
    for (float offset : {0.0f, 3.0f, 100.0f}) {
      SCOPED_TRACE(testing::Message()
                   << "center " << s.center << " scale " << s.scale << " rows "
                   << s.rows << " offset " << offset);
      absl::StatusOr<std::unique_ptr<BatchNormOp>> op =
          BatchNormOp::Create(s, engine.get());
      ASSERT_TRUE(op.ok()) << op.status();
      Buffers b = MakeBuffers(s, offset);
      ASSERT_EQ(Train(**op, b), absl::OkStatus());
      ASSERT_EQ(Backward(**op, b, b.dx.data()), absl::OkStatus());
      Reference ref = RefBatchNorm(s, b.x, b.gamma, b.beta, b.dy);
      const double tolerance = 1e-6 + 1.5e-7 * offset;
      EXPECT_LE(MaxAbsDiff(b.y, ref.y), tolerance);
      EXPECT_LE(MaxAbsDiff(b.mean, ref.mean), 1e-7 * (1 + offset));
      EXPECT_LE(MaxAbsDiff(b.var, ref.var), 1e-6);
      EXPECT_LE(MaxAbsDiff(b.dx, ref.dx), 10 * tolerance);
      // Sums over the rows, in float32 inside oneDNN.
      if (s.scale) {
        EXPECT_LE(MaxAbsDiff(b.dgamma, ref.dgamma),
                  2e-7 * s.rows * (1 + offset));
      }
      if (s.center) {
        EXPECT_LE(MaxAbsDiff(b.dbeta, ref.dbeta), 2e-7 * s.rows);
      }
    }
  }
}

TEST(BatchNormOp, BatchVarianceIsBiased) {
  std::unique_ptr<Engine> engine = MakeEngine();
  BatchNormShape s = Shape(false, false);
  s.rows = 4;
  s.channels = 1;
  absl::StatusOr<std::unique_ptr<BatchNormOp>> op =
      BatchNormOp::Create(s, engine.get());
  ASSERT_TRUE(op.ok()) << op.status();
  std::vector<float> x = {1, 2, 3, 6}, y(4), mean(1), var(1);
  ASSERT_EQ((*op)->ForwardTraining(x.data(), nullptr, nullptr, y.data(),
                                   mean.data(), var.data()),
            absl::OkStatus());
  EXPECT_FLOAT_EQ(mean[0], 3.0f);
  EXPECT_FLOAT_EQ(var[0], 3.5f);  // (4 + 1 + 0 + 9) / 4, not / 3.
}

TEST(BatchNormOp, GradientsMatchFiniteDifferences) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (const BatchNormShape& s : Shapes()) {
    SCOPED_TRACE(testing::Message()
                 << "center " << s.center << " scale " << s.scale);
    absl::StatusOr<std::unique_ptr<BatchNormOp>> created =
        BatchNormOp::Create(s, engine.get());
    ASSERT_TRUE(created.ok()) << created.status();
    BatchNormOp& op = **created;
    Buffers b = MakeBuffers(s, 0.0f);
    auto loss = [&]() {
      EXPECT_EQ(Train(op, b), absl::OkStatus());
      return Dot(b.y, b.dy);
    };
    loss();
    ASSERT_EQ(Backward(op, b, b.dx.data()), absl::OkStatus());
    EXPECT_TRUE(GradientsClose(
        b.dx, NumericGradient(loss, b.x.data(), b.x.size(), kEps),
        kGradientTolerance));
    if (s.scale) {
      EXPECT_TRUE(GradientsClose(
          b.dgamma, NumericGradient(loss, b.gamma.data(), s.channels, kEps),
          kGradientTolerance));
    }
    if (s.center) {
      EXPECT_TRUE(GradientsClose(
          b.dbeta, NumericGradient(loss, b.beta.data(), s.channels, kEps),
          kGradientTolerance));
    }
  }
}

TEST(BatchNormOp, InferenceUsesTheGivenMovingStatistics) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (const BatchNormShape& s : Shapes()) {
    SCOPED_TRACE(testing::Message()
                 << "center " << s.center << " scale " << s.scale);
    absl::StatusOr<std::unique_ptr<BatchNormOp>> op =
        BatchNormOp::Create(s, engine.get());
    ASSERT_TRUE(op.ok()) << op.status();
    Buffers b = MakeBuffers(s, 0.0f);
    std::vector<float> moving_mean = RandomFloats(s.channels, 5);
    std::vector<float> moving_var = RandomFloats(s.channels, 6, 0.5f, 2.0f);
    ASSERT_EQ((*op)->ForwardInference(b.x.data(), Or(s.scale, b.gamma),
                                      Or(s.center, b.beta), moving_mean.data(),
                                      moving_var.data(), b.y.data()),
              absl::OkStatus());
    Reference ref =
        RefBatchNorm(s, b.x, b.gamma, b.beta, b.dy, &moving_mean, &moving_var);
    EXPECT_LE(MaxAbsDiff(b.y, ref.y), 2e-5);
  }
}

TEST(BatchNormOp, InferenceLeavesTheTrainingStatisticsForBackward) {
  std::unique_ptr<Engine> engine = MakeEngine();
  BatchNormShape s = Shape(true, true);
  absl::StatusOr<std::unique_ptr<BatchNormOp>> op =
      BatchNormOp::Create(s, engine.get());
  ASSERT_TRUE(op.ok()) << op.status();
  Buffers b = MakeBuffers(s, 0.0f);
  ASSERT_EQ(Train(**op, b), absl::OkStatus());
  ASSERT_EQ(Backward(**op, b, b.dx.data()), absl::OkStatus());
  const std::vector<float> dx = b.dx, dgamma = b.dgamma, dbeta = b.dbeta;
  std::vector<float> other_x = RandomFloats(b.x.size(), 7, 3.0f, 9.0f);
  std::vector<float> y(b.y.size());
  ASSERT_EQ(
      (*op)->ForwardInference(other_x.data(), b.gamma.data(), b.beta.data(),
                              b.mean.data(), b.var.data(), y.data()),
      absl::OkStatus());
  ASSERT_EQ(Backward(**op, b, b.dx.data()), absl::OkStatus());
  EXPECT_EQ(b.dx, dx);
  EXPECT_EQ(b.dgamma, dgamma);
  EXPECT_EQ(b.dbeta, dbeta);
}

TEST(BatchNormOp, BackwardWithoutDxGivesTheSameParameterGradients) {
  std::unique_ptr<Engine> engine = MakeEngine();
  BatchNormShape s = Shape(true, true);
  absl::StatusOr<std::unique_ptr<BatchNormOp>> op =
      BatchNormOp::Create(s, engine.get());
  ASSERT_TRUE(op.ok()) << op.status();
  Buffers b = MakeBuffers(s, 0.0f);
  ASSERT_EQ(Train(**op, b), absl::OkStatus());
  ASSERT_EQ(Backward(**op, b, b.dx.data()), absl::OkStatus());
  const std::vector<float> dgamma = b.dgamma, dbeta = b.dbeta;
  ASSERT_EQ(Backward(**op, b, /*dx=*/nullptr), absl::OkStatus());
  for (int64_t c = 0; c < s.channels; ++c) {
    EXPECT_NEAR(b.dgamma[c], dgamma[c], 1e-5);
    EXPECT_NEAR(b.dbeta[c], dbeta[c], 1e-5);
  }
}

TEST(BatchNormOp, BackwardBeforeTrainingForwardFails) {
  std::unique_ptr<Engine> engine = MakeEngine();
  BatchNormShape s = Shape(false, false);
  absl::StatusOr<std::unique_ptr<BatchNormOp>> op =
      BatchNormOp::Create(s, engine.get());
  ASSERT_TRUE(op.ok()) << op.status();
  Buffers b = MakeBuffers(s, 0.0f);
  std::vector<float> ones(s.channels, 1.0f);
  ASSERT_EQ((*op)->ForwardInference(b.x.data(), nullptr, nullptr, ones.data(),
                                    ones.data(), b.y.data()),
            absl::OkStatus());
  absl::Status status = Backward(**op, b, b.dx.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "BatchNorm backward: no training Forward has run");
}

TEST(BatchNormOp, RefusesParametersThatDoNotMatchTheFlags) {
  std::unique_ptr<Engine> engine = MakeEngine();
  BatchNormShape s = Shape(/*center=*/true, /*scale=*/false);
  absl::StatusOr<std::unique_ptr<BatchNormOp>> op =
      BatchNormOp::Create(s, engine.get());
  ASSERT_TRUE(op.ok()) << op.status();
  Buffers b = MakeBuffers(s, 0.0f);
  absl::Status status = (*op)->ForwardTraining(
      b.x.data(), b.gamma.data(), b.beta.data(), b.y.data(), nullptr, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "BatchNorm forward (training): gamma must be given iff scale, beta "
            "iff center");
  EXPECT_EQ((*op)
                ->ForwardInference(b.x.data(), nullptr, b.beta.data(), nullptr,
                                   b.var.data(), b.y.data())
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BatchNormOp, CreateRefusesBadShapes) {
  std::unique_ptr<Engine> engine = MakeEngine();
  BatchNormShape s = Shape(true, true);
  s.channels = 0;
  absl::Status status = BatchNormOp::Create(s, engine.get()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "BatchNorm: channels must be positive, got 0");
  s = Shape(true, true);
  s.rows = 0;
  EXPECT_EQ(BatchNormOp::Create(s, engine.get()).status().message(),
            "BatchNorm: rows must be positive, got 0");
  s = Shape(true, true);
  s.epsilon = INFINITY;
  status = BatchNormOp::Create(s, engine.get()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "BatchNorm: epsilon must be finite and non-negative, got inf");
}

// The statistics and gradient sums run over chunks of rows on the engine's
// threads, summed in chunk order: any thread count gives the same bits (the
// sync-equivalence tests rely on reproducible steps).
TEST(BatchNormOp, ThreadCountDoesNotChangeAnyBit) {
  BatchNormShape s = Shape(true, true);
  s.rows = 8 * 28 * 28 + 5;  // Several chunks, the last one short.
  s.channels = 16;
  Buffers first;
  for (int threads : {1, 2, 3}) {
    EngineOptions options;
    options.num_threads = threads;
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    absl::StatusOr<std::unique_ptr<BatchNormOp>> op =
        BatchNormOp::Create(s, engine->get());
    ASSERT_TRUE(op.ok()) << op.status();
    Buffers b = MakeBuffers(s, 3.0f);
    ASSERT_TRUE(Train(**op, b).ok());
    ASSERT_TRUE(Backward(**op, b, b.dx.data()).ok());
    if (threads == 1) {
      first = b;
      // And they are right: within float rounding of the double reference.
      Reference ref = RefBatchNorm(s, b.x, b.gamma, b.beta, b.dy);
      EXPECT_LT(MaxAbsDiff(b.y, ref.y), 1e-5);
      EXPECT_LT(MaxAbsDiff(b.dx, ref.dx), 1e-5);
      EXPECT_LT(MaxAbsDiff(b.dgamma, ref.dgamma), 1e-3);
      continue;
    }
    EXPECT_EQ(b.y, first.y) << threads << " threads";
    EXPECT_EQ(b.mean, first.mean) << threads << " threads";
    EXPECT_EQ(b.var, first.var) << threads << " threads";
    EXPECT_EQ(b.dx, first.dx) << threads << " threads";
    EXPECT_EQ(b.dgamma, first.dgamma) << threads << " threads";
    EXPECT_EQ(b.dbeta, first.dbeta) << threads << " threads";
  }
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

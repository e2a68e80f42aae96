#include "compute/cpu/dense.h"

#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Forward against the double reference: float32 sums of <= 200 products of
// values in [-1, 1]. Gradient checks: central differences, eps 1e-3, float32
// forward; max |analytic - numeric| <= 1e-2 * max |numeric|.
constexpr double kForwardTolerance = 1e-4;
constexpr double kEps = 1e-3;
constexpr double kGradientTolerance = 1e-2;

std::unique_ptr<Engine> MakeEngine() {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create({});
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

DenseShape Shape(int64_t batch, int64_t in, int64_t out) {
  DenseShape s;
  s.batch = batch;
  s.in = in;
  s.out = out;
  return s;
}

struct Buffers {
  std::vector<float> x, w, b, y, dy, dx, dw, db;
  explicit Buffers(const DenseShape& s, uint32_t seed = 1)
      : x(RandomFloats(s.batch * s.in, seed)),
        w(RandomFloats(s.in * s.out, seed + 1)),
        b(RandomFloats(s.out, seed + 2)),
        y(s.batch * s.out),
        dy(RandomFloats(s.batch * s.out, seed + 3)),
        dx(s.batch * s.in),
        dw(s.in * s.out),
        db(s.out) {}
};

// y[n, o] = sum_i x[n, i] w[i, o] + b[o], in double.
std::vector<double> RefForward(const DenseShape& s, const Buffers& buf) {
  std::vector<double> y(s.batch * s.out);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t o = 0; o < s.out; ++o) {
      double sum = s.use_bias ? buf.b[o] : 0.0;
      for (int64_t i = 0; i < s.in; ++i) {
        sum += static_cast<double>(buf.x[n * s.in + i]) * buf.w[i * s.out + o];
      }
      y[n * s.out + o] = sum;
    }
  return y;
}

TEST(DenseOp, ForwardMatchesNaiveReference) {
  std::unique_ptr<Engine> engine = MakeEngine();
  DenseShape no_bias = Shape(3, 7, 5);
  no_bias.use_bias = false;
  for (const DenseShape& s :
       {Shape(2, 6, 4), Shape(1, 200, 10), Shape(32, 64, 33), no_bias}) {
    SCOPED_TRACE(testing::Message() << s.batch << "x" << s.in << "->" << s.out);
    absl::StatusOr<std::unique_ptr<DenseOp>> dense =
        DenseOp::Create(s, engine.get());
    ASSERT_TRUE(dense.ok()) << dense.status();
    Buffers buf(s);
    ASSERT_TRUE((*dense)
                    ->Forward(buf.x.data(), buf.w.data(),
                              s.use_bias ? buf.b.data() : nullptr, buf.y.data())
                    .ok());
    std::vector<double> expected = RefForward(s, buf);
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(buf.y[i], expected[i], kForwardTolerance) << i;
    }
  }
}

TEST(DenseOp, GradientsMatchFiniteDifferences) {
  std::unique_ptr<Engine> engine = MakeEngine();
  // Batch 1 too: the last batch of an epoch may hold one example.
  for (const DenseShape& s : {Shape(2, 6, 4), Shape(1, 5, 3)}) {
    SCOPED_TRACE(testing::Message() << s.batch << "x" << s.in << "->" << s.out);
    absl::StatusOr<std::unique_ptr<DenseOp>> created =
        DenseOp::Create(s, engine.get());
    ASSERT_TRUE(created.ok()) << created.status();
    DenseOp& dense = **created;
    Buffers buf(s, 4);
    ASSERT_TRUE(dense
                    .Backward(buf.x.data(), buf.w.data(), buf.dy.data(),
                              buf.dx.data(), buf.dw.data(), buf.db.data())
                    .ok());
    auto loss = [&]() {
      EXPECT_TRUE(
          dense.Forward(buf.x.data(), buf.w.data(), buf.b.data(), buf.y.data())
              .ok());
      return Dot(buf.y, buf.dy);
    };
    EXPECT_TRUE(GradientsClose(
        buf.dx, NumericGradient(loss, buf.x.data(), buf.x.size(), kEps),
        kGradientTolerance))
        << "dx";
    EXPECT_TRUE(GradientsClose(
        buf.dw, NumericGradient(loss, buf.w.data(), buf.w.size(), kEps),
        kGradientTolerance))
        << "dw";
    EXPECT_TRUE(GradientsClose(
        buf.db, NumericGradient(loss, buf.b.data(), buf.b.size(), kEps),
        kGradientTolerance))
        << "db";
  }
}

TEST(DenseOp, FirstLayerSkipsInputGradient) {
  std::unique_ptr<Engine> engine = MakeEngine();
  DenseShape s = Shape(4, 9, 3);
  DenseShape first = s;
  first.compute_dx = false;
  absl::StatusOr<std::unique_ptr<DenseOp>> full =
      DenseOp::Create(s, engine.get());
  absl::StatusOr<std::unique_ptr<DenseOp>> no_dx =
      DenseOp::Create(first, engine.get());
  ASSERT_TRUE(full.ok() && no_dx.ok());
  Buffers a(s), b(s);
  ASSERT_TRUE((*full)
                  ->Backward(a.x.data(), a.w.data(), a.dy.data(), a.dx.data(),
                             a.dw.data(), a.db.data())
                  .ok());
  ASSERT_TRUE((*no_dx)
                  ->Backward(b.x.data(), nullptr, b.dy.data(), nullptr,
                             b.dw.data(), b.db.data())
                  .ok());
  EXPECT_EQ(a.dw, b.dw);
  EXPECT_EQ(a.db, b.db);
}

TEST(DenseOp, ForwardTwiceGivesIdenticalResults) {
  std::unique_ptr<Engine> engine = MakeEngine();
  DenseShape s = Shape(16, 128, 10);
  absl::StatusOr<std::unique_ptr<DenseOp>> dense =
      DenseOp::Create(s, engine.get());
  ASSERT_TRUE(dense.ok()) << dense.status();
  Buffers buf(s);
  std::vector<float> first(buf.y.size()), second(buf.y.size());
  ASSERT_TRUE(
      (*dense)
          ->Forward(buf.x.data(), buf.w.data(), buf.b.data(), first.data())
          .ok());
  ASSERT_TRUE(
      (*dense)
          ->Forward(buf.x.data(), buf.w.data(), buf.b.data(), second.data())
          .ok());
  EXPECT_EQ(first, second);
}

// bf16 mixed precision: inputs rounded to 8 significant bits, products
// accumulated in float32. Against the float32 op on the same buffers:
// max |bf16 - fp32| <= 1e-2 * max |fp32| for y, dx, dw and db.
constexpr double kBf16Tolerance = 1e-2;

struct DenseRun {
  std::vector<float> y, dx, dw, db;
  int64_t conversions = 0;
};

DenseRun RunDense(DenseShape s, bool bf16, Engine* engine, const Buffers& in) {
  s.bf16 = bf16;
  DenseRun run;
  absl::StatusOr<std::unique_ptr<DenseOp>> dense = DenseOp::Create(s, engine);
  EXPECT_TRUE(dense.ok()) << dense.status();
  if (!dense.ok()) return run;
  run.y.resize(s.batch * s.out);
  run.dx.resize(s.batch * s.in);
  run.dw.resize(s.in * s.out);
  run.db.resize(s.out);
  EXPECT_TRUE((*dense)
                  ->Forward(in.x.data(), in.w.data(), in.b.data(), run.y.data())
                  .ok());
  EXPECT_TRUE((*dense)
                  ->Backward(in.x.data(), in.w.data(), in.dy.data(),
                             run.dx.data(), run.dw.data(), run.db.data())
                  .ok());
  run.conversions = (*dense)->bf16_conversions();
  return run;
}

TEST(DenseOp, Bf16IsCloseToFloat32ForwardAndBackward) {
  PSTRAIN_SKIP_WITHOUT_BF16();
  std::unique_ptr<Engine> engine = MakeEngine();
  // The seed cnn's dense layers (flattened 5x5x64 -> 64 -> 10), an odd
  // size and a batch of 1.
  for (const DenseShape& s : {Shape(32, 1600, 64), Shape(32, 64, 10),
                              Shape(7, 33, 17), Shape(1, 200, 10)}) {
    SCOPED_TRACE(testing::Message() << s.batch << "x" << s.in << "->" << s.out);
    Buffers buf(s, 9);
    const DenseRun fp32 = RunDense(s, false, engine.get(), buf);
    const DenseRun bf16 = RunDense(s, true, engine.get(), buf);
    EXPECT_LE(MaxRelativeDifference(bf16.y, fp32.y), kBf16Tolerance);
    EXPECT_LE(MaxRelativeDifference(bf16.dx, fp32.dx), kBf16Tolerance);
    EXPECT_LE(MaxRelativeDifference(bf16.dw, fp32.dw), kBf16Tolerance);
    EXPECT_LE(MaxRelativeDifference(bf16.db, fp32.db), kBf16Tolerance);
    // And it did compute in bf16: random inputs lose bits when rounded.
    EXPECT_GT(MaxRelativeDifference(bf16.y, fp32.y), 0);
    EXPECT_GT(MaxRelativeDifference(bf16.dw, fp32.dw), 0);
    // x, w and dy converted once each: Backward reused the Forward's x and w.
    EXPECT_EQ(bf16.conversions, 3);
    EXPECT_EQ(fp32.conversions, 0);
  }
}

// Backward given other buffers than the last Forward converts them: its
// gradients are those of its own x and w.
TEST(DenseOp, Bf16BackwardConvertsBuffersTheForwardDidNotSee) {
  PSTRAIN_SKIP_WITHOUT_BF16();
  std::unique_ptr<Engine> engine = MakeEngine();
  DenseShape s = Shape(8, 40, 12);
  Buffers first(s, 21), second(s, 31);
  const DenseRun fp32 = RunDense(s, false, engine.get(), second);
  s.bf16 = true;
  absl::StatusOr<std::unique_ptr<DenseOp>> dense =
      DenseOp::Create(s, engine.get());
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_TRUE((*dense)
                  ->Forward(first.x.data(), first.w.data(), first.b.data(),
                            first.y.data())
                  .ok());
  ASSERT_TRUE((*dense)
                  ->Backward(second.x.data(), second.w.data(), second.dy.data(),
                             second.dx.data(), second.dw.data(),
                             second.db.data())
                  .ok());
  EXPECT_LE(MaxRelativeDifference(second.dx, fp32.dx), kBf16Tolerance);
  EXPECT_LE(MaxRelativeDifference(second.dw, fp32.dw), kBf16Tolerance);
  // A second Backward of the same buffers converts them again too: a
  // Backward's copies never outlive it.
  const int64_t before = (*dense)->bf16_conversions();
  ASSERT_TRUE((*dense)
                  ->Backward(second.x.data(), second.w.data(), second.dy.data(),
                             second.dx.data(), second.dw.data(),
                             second.db.data())
                  .ok());
  EXPECT_EQ((*dense)->bf16_conversions() - before, 3);
}

TEST(DenseOp, RejectsBadShapesAndArguments) {
  std::unique_ptr<Engine> engine = MakeEngine();
  EXPECT_EQ(DenseOp::Create(Shape(2, 0, 3), engine.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
  DenseShape s = Shape(2, 3, 4);
  absl::StatusOr<std::unique_ptr<DenseOp>> dense =
      DenseOp::Create(s, engine.get());
  ASSERT_TRUE(dense.ok());
  Buffers buf(s);
  EXPECT_EQ((*dense)
                ->Backward(buf.x.data(), buf.w.data(), buf.dy.data(),
                           buf.dx.data(), buf.dw.data(), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

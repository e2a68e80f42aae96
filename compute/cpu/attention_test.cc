#include "compute/cpu/attention.h"

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// The op runs in float32; the references run in double. Forward: max |y -
// ref| <= kForwardTolerance * max(1, max |ref|). Gradients: central
// differences of the double reference (eps 1e-3, truncation error ~1e-7
// relative), so the tolerance only has to cover float32 rounding.
constexpr double kForwardTolerance = 2e-6;
constexpr double kEps = 1e-3;
constexpr double kGradientTolerance = 2e-5;
// The error is relative to the sample's largest |gradient|, and at least to
// this fraction of the largest gradient of the whole problem: key/bias's
// gradient is exactly 0 (a bias on every key shifts a row of scores by a
// constant, which the softmax ignores), so float32 gives only rounding noise
// of the size of the key kernel's gradient.
constexpr double kGradientFloor = 5e-2;

std::unique_ptr<Engine> MakeEngine() {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create({});
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

AttentionShape Shape(int64_t batch, int64_t tq, int64_t tv, int64_t dq,
                     int64_t dk, int64_t dv, int64_t heads, int64_t key_dim,
                     int64_t value_dim = 0, int64_t output_dim = 0) {
  AttentionShape s;
  s.batch = batch;
  s.tq = tq;
  s.tv = tv;
  s.dq = dq;
  s.dk = dk;
  s.dv = dv;
  s.heads = heads;
  s.key_dim = key_dim;
  s.value_dim = value_dim;
  s.output_dim = output_dim;
  return s;
}

std::string Describe(const AttentionShape& s) {
  std::ostringstream out;
  out << "B" << s.batch << " Tq" << s.tq << " Tv" << s.tv << " dq" << s.dq
      << " dk" << s.dk << " dv" << s.dv << " H" << s.heads << " Dk" << s.key_dim
      << " Dv" << s.value_dim << " O" << s.output_dim
      << (s.use_bias ? "" : " no-bias") << (s.causal ? " causal" : "");
  return out.str();
}

// Tensors by name: "query", "key", "value" and the layer's variables
// ("query/kernel", ...), in float for the op or double for the reference.
template <typename T>
using Tensors = std::map<std::string, std::vector<T>>;

int64_t Size(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Random inputs and variables for `s` (defaults resolved); weights are
// scaled so that scores spread over a few units and the softmax is not flat.
Tensors<float> RandomTensors(const AttentionShape& s, uint32_t seed) {
  Tensors<float> t;
  t["query"] = RandomFloats(s.batch * s.tq * s.dq, seed);
  t["key"] = RandomFloats(s.batch * s.tv * s.dk, seed + 1);
  t["value"] = RandomFloats(s.batch * s.tv * s.dv, seed + 2);
  uint32_t next = seed + 3;
  for (const AttentionVariable& v : AttentionOp::Variables(s)) {
    t[v.name] = RandomFloats(Size(v.dims), next++, -0.8f, 0.8f);
  }
  return t;
}

Tensors<double> ToDouble(const Tensors<float>& t) {
  Tensors<double> d;
  for (const auto& [name, values] : t) {
    d[name] = std::vector<double>(values.begin(), values.end());
  }
  return d;
}

AttentionWeights WeightsOf(const Tensors<float>& t, bool use_bias) {
  auto get = [&](const char* name) { return t.at(name).data(); };
  AttentionWeights w;
  w.query_kernel = get("query/kernel");
  w.key_kernel = get("key/kernel");
  w.value_kernel = get("value/kernel");
  w.output_kernel = get("attention_output/kernel");
  if (use_bias) {
    w.query_bias = get("query/bias");
    w.key_bias = get("key/bias");
    w.value_bias = get("value/bias");
    w.output_bias = get("attention_output/bias");
  }
  return w;
}

// Gradient buffers for every variable, and pointers to them.
AttentionGradients GradientsOf(const AttentionShape& s, Tensors<float>* g) {
  for (const AttentionVariable& v : AttentionOp::Variables(s)) {
    (*g)[v.name].assign(Size(v.dims), NAN);
  }
  auto get = [&](const char* name) { return (*g)[name].data(); };
  AttentionGradients out;
  out.query_kernel = get("query/kernel");
  out.key_kernel = get("key/kernel");
  out.value_kernel = get("value/kernel");
  out.output_kernel = get("attention_output/kernel");
  if (s.use_bias) {
    out.query_bias = get("query/bias");
    out.key_bias = get("key/bias");
    out.value_bias = get("value/bias");
    out.output_bias = get("attention_output/bias");
  }
  return out;
}

// x [B, T, d] x kernel [d, H, D] + bias [H, D] -> [B, T, H, D].
std::vector<double> RefProject(const std::vector<double>& x, int64_t rows,
                               int64_t d, const std::vector<double>& kernel,
                               const std::vector<double>* bias, int64_t n) {
  std::vector<double> y(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias != nullptr ? (*bias)[j] : 0.0;
      for (int64_t c = 0; c < d; ++c) sum += x[r * d + c] * kernel[c * n + j];
      y[r * n + j] = sum;
    }
  }
  return y;
}

// Keras's MultiHeadAttention written out in double.
std::vector<double> RefForward(const AttentionShape& s,
                               const Tensors<double>& t) {
  const int64_t b = s.batch, tq = s.tq, tv = s.tv, h = s.heads;
  const int64_t dk = s.key_dim, dv = s.value_dim, o = s.output_dim;
  auto bias = [&](const char* name) {
    return s.use_bias ? &t.at(name) : nullptr;
  };
  std::vector<double> q =
      RefProject(t.at("query"), b * tq, s.dq, t.at("query/kernel"),
                 bias("query/bias"), h * dk);
  std::vector<double> k = RefProject(
      t.at("key"), b * tv, s.dk, t.at("key/kernel"), bias("key/bias"), h * dk);
  std::vector<double> v =
      RefProject(t.at("value"), b * tv, s.dv, t.at("value/kernel"),
                 bias("value/bias"), h * dv);
  std::vector<double> context(b * tq * h * dv, 0.0), p(tv);
  for (int64_t n = 0; n < b; ++n) {
    for (int64_t head = 0; head < h; ++head) {
      for (int64_t i = 0; i < tq; ++i) {
        const int64_t last = s.causal ? std::min(i, tv - 1) : tv - 1;
        const double* qi = &q[((n * tq + i) * h + head) * dk];
        double max = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= last; ++j) {
          const double* kj = &k[((n * tv + j) * h + head) * dk];
          double dot = 0;
          for (int64_t e = 0; e < dk; ++e) dot += qi[e] / std::sqrt(dk) * kj[e];
          p[j] = dot;
          max = std::max(max, dot);
        }
        for (int64_t j = 0; j <= last; ++j) sum += p[j] = std::exp(p[j] - max);
        double* ci = &context[((n * tq + i) * h + head) * dv];
        for (int64_t j = 0; j <= last; ++j) {
          const double* vj = &v[((n * tv + j) * h + head) * dv];
          for (int64_t e = 0; e < dv; ++e) ci[e] += p[j] / sum * vj[e];
        }
      }
    }
  }
  return RefProject(context, b * tq, h * dv, t.at("attention_output/kernel"),
                    bias("attention_output/bias"), o);
}

double RefLoss(const AttentionShape& s, const Tensors<double>& t,
               const std::vector<float>& dy) {
  std::vector<double> y = RefForward(s, t);
  double loss = 0;
  for (size_t i = 0; i < y.size(); ++i) loss += y[i] * dy[i];
  return loss;
}

// Checks `analytic` (dL/d tensor) against central differences of the double
// reference at a spread of elements. Every name in `tied` holds the same
// values (inputs passed as one buffer) and is perturbed together.
void ExpectGradient(const AttentionShape& s, Tensors<double> t,
                    const std::vector<float>& dy, double floor,
                    const std::vector<std::string>& tied,
                    const std::vector<float>& analytic) {
  const int64_t n = t.at(tied[0]).size();
  ASSERT_EQ(static_cast<int64_t>(analytic.size()), n) << tied[0];
  std::vector<float> sampled;
  std::vector<double> numeric;
  const int64_t count = std::min<int64_t>(n, 12);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = count == 1 ? 0 : k * (n - 1) / (count - 1);
    const double original = t.at(tied[0])[i];
    auto loss_at = [&](double value) {
      for (const std::string& name : tied) t[name][i] = value;
      return RefLoss(s, t, dy);
    };
    const double plus = loss_at(original + kEps);
    const double minus = loss_at(original - kEps);
    loss_at(original);
    sampled.push_back(analytic[i]);
    numeric.push_back((plus - minus) / (2 * kEps));
  }
  double scale = floor, worst = 0;
  for (double value : numeric) scale = std::max(scale, std::abs(value));
  for (size_t i = 0; i < numeric.size(); ++i) {
    const double error = std::abs(sampled[i] - numeric[i]);
    if (!(error <= kGradientTolerance * scale)) {  // Also catches NaN.
      ADD_FAILURE() << tied[0] << " sample " << i << ": analytic " << sampled[i]
                    << " vs numeric " << numeric[i];
    }
    worst = std::max(worst, error / scale);
  }
  ::testing::Test::RecordProperty(tied[0], std::to_string(worst));
}

TEST(AttentionOp, VariablesFollowKeras3) {
  AttentionShape s = Shape(2, 3, 4, 5, 6, 7, 2, 3);
  std::vector<AttentionVariable> v = AttentionOp::Variables(s);
  ASSERT_EQ(v.size(), 8u);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"query/kernel", {5, 2, 3}},
      {"query/bias", {2, 3}},
      {"key/kernel", {6, 2, 3}},
      {"key/bias", {2, 3}},
      {"value/kernel", {7, 2, 3}},
      {"value/bias", {2, 3}},
      {"attention_output/kernel", {2, 3, 5}},
      {"attention_output/bias", {5}}};
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(v[i].name, expected[i].first);
    EXPECT_EQ(v[i].dims, expected[i].second) << v[i].name;
  }
  s.use_bias = false;
  s.value_dim = 4;
  s.output_dim = 9;
  v = AttentionOp::Variables(s);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[2].dims, (std::vector<int64_t>{7, 2, 4}));
  EXPECT_EQ(v[3].name, "attention_output/kernel");
  EXPECT_EQ(v[3].dims, (std::vector<int64_t>{2, 4, 9}));
}

std::vector<AttentionShape> ForwardShapes() {
  AttentionShape causal = Shape(2, 5, 5, 8, 8, 8, 2, 4);
  causal.causal = true;
  AttentionShape causal_long_query = Shape(1, 6, 4, 3, 5, 2, 3, 2, 5, 7);
  causal_long_query.causal = true;
  AttentionShape causal_short_query = Shape(2, 3, 7, 4, 4, 4, 1, 6);
  causal_short_query.causal = true;
  AttentionShape no_bias = Shape(2, 4, 3, 6, 5, 4, 3, 2, 3, 5);
  no_bias.use_bias = false;
  return {Shape(2, 3, 4, 5, 6, 7, 2, 3),
          Shape(1, 1, 1, 1, 1, 1, 1, 1),
          Shape(3, 7, 5, 4, 3, 6, 4, 5, 2, 3),
          Shape(2, 33, 17, 40, 24, 24, 4, 16, 8, 32),
          causal,
          causal_long_query,
          causal_short_query,
          no_bias};
}

TEST(AttentionOp, ForwardMatchesDoubleReference) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (const AttentionShape& requested : ForwardShapes()) {
    SCOPED_TRACE(Describe(requested));
    absl::StatusOr<std::unique_ptr<AttentionOp>> op =
        AttentionOp::Create(requested, engine.get());
    ASSERT_TRUE(op.ok()) << op.status();
    const AttentionShape& s = (*op)->shape();
    Tensors<float> t = RandomTensors(s, 7);
    std::vector<float> y(s.batch * s.tq * s.output_dim, NAN);
    ASSERT_TRUE((*op)
                    ->Forward(t["query"].data(), t["key"].data(),
                              t["value"].data(), WeightsOf(t, s.use_bias),
                              y.data())
                    .ok());
    std::vector<double> expected = RefForward(s, ToDouble(t));
    double scale = 1;
    for (double e : expected) scale = std::max(scale, std::abs(e));
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(y[i], expected[i], kForwardTolerance * scale) << i;
    }
  }
}

// How the inputs are passed: three buffers, key = value (Keras's default
// key), or query = key = value (self-attention).
enum class Inputs { kSeparate, kKeyIsValue, kSelf };

void CheckGradients(const AttentionShape& requested, Inputs inputs) {
  std::unique_ptr<Engine> engine = MakeEngine();
  absl::StatusOr<std::unique_ptr<AttentionOp>> created =
      AttentionOp::Create(requested, engine.get());
  ASSERT_TRUE(created.ok()) << created.status();
  AttentionOp& op = **created;
  const AttentionShape& s = op.shape();
  Tensors<float> t = RandomTensors(s, 11);
  if (inputs != Inputs::kSeparate) t["key"] = t["value"];
  if (inputs == Inputs::kSelf) t["query"] = t["value"];
  const float* value = t["value"].data();
  const float* key = inputs == Inputs::kSeparate ? t["key"].data() : value;
  const float* query = inputs == Inputs::kSelf ? value : t["query"].data();
  const std::vector<float> dy = RandomFloats(s.batch * s.tq * s.output_dim, 99);
  std::vector<float> y(dy.size());
  const AttentionWeights w = WeightsOf(t, s.use_bias);
  ASSERT_TRUE(op.Forward(query, key, value, w, y.data()).ok());

  Tensors<float> g;
  AttentionGradients grads = GradientsOf(s, &g);
  g["value"].assign(t["value"].size(), NAN);
  grads.value = g["value"].data();
  if (inputs == Inputs::kSeparate) g["key"].assign(t["key"].size(), NAN);
  grads.key = inputs == Inputs::kSeparate ? g["key"].data() : grads.value;
  if (inputs != Inputs::kSelf) g["query"].assign(t["query"].size(), NAN);
  grads.query = inputs == Inputs::kSelf ? grads.value : g["query"].data();
  ASSERT_TRUE(op.Backward(query, key, value, w, dy.data(), grads).ok());

  const Tensors<double> ref = ToDouble(t);
  double floor = 0;
  for (const auto& [name, values] : g) {
    for (float v : values) floor = std::max<double>(floor, std::abs(v));
  }
  floor *= kGradientFloor;
  for (const AttentionVariable& v : AttentionOp::Variables(s)) {
    ExpectGradient(s, ref, dy, floor, {v.name}, g[v.name]);
  }
  switch (inputs) {
    case Inputs::kSeparate:
      ExpectGradient(s, ref, dy, floor, {"query"}, g["query"]);
      ExpectGradient(s, ref, dy, floor, {"key"}, g["key"]);
      ExpectGradient(s, ref, dy, floor, {"value"}, g["value"]);
      break;
    case Inputs::kKeyIsValue:
      ExpectGradient(s, ref, dy, floor, {"query"}, g["query"]);
      ExpectGradient(s, ref, dy, floor, {"value", "key"}, g["value"]);
      break;
    case Inputs::kSelf:
      ExpectGradient(s, ref, dy, floor, {"value", "key", "query"}, g["value"]);
      break;
  }
}

TEST(AttentionOp, GradientsMatchFiniteDifferences) {
  for (const AttentionShape& s : ForwardShapes()) {
    SCOPED_TRACE(Describe(s));
    CheckGradients(s, Inputs::kSeparate);
  }
}

TEST(AttentionOp, KeyDefaultingToValueGetsBothGradients) {
  AttentionShape causal = Shape(2, 4, 5, 3, 6, 6, 2, 3, 2, 4);
  causal.causal = true;
  for (const AttentionShape& s : {Shape(2, 3, 5, 4, 6, 6, 3, 2), causal}) {
    SCOPED_TRACE(Describe(s));
    CheckGradients(s, Inputs::kKeyIsValue);
  }
}

TEST(AttentionOp, SelfAttentionGradientSumsAllThreePaths) {
  AttentionShape causal = Shape(2, 6, 6, 8, 8, 8, 2, 4);
  causal.causal = true;
  AttentionShape no_bias = Shape(1, 4, 4, 5, 5, 5, 3, 2, 4, 3);
  no_bias.use_bias = false;
  for (const AttentionShape& s :
       {Shape(2, 5, 5, 6, 6, 6, 2, 3), causal, no_bias}) {
    SCOPED_TRACE(Describe(s));
    CheckGradients(s, Inputs::kSelf);
  }
}

// Self-attention on x: changing x at position t changes no output before t
// when causal, and does when not.
TEST(AttentionOp, CausalMaskHidesLaterPositions) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (bool causal : {true, false}) {
    AttentionShape requested = Shape(2, 7, 7, 6, 6, 6, 2, 4);
    requested.causal = causal;
    absl::StatusOr<std::unique_ptr<AttentionOp>> op =
        AttentionOp::Create(requested, engine.get());
    ASSERT_TRUE(op.ok()) << op.status();
    const AttentionShape& s = (*op)->shape();
    Tensors<float> t = RandomTensors(s, 5);
    const AttentionWeights w = WeightsOf(t, true);
    std::vector<float> x = t["query"];
    std::vector<float> before(s.batch * s.tq * s.output_dim);
    ASSERT_TRUE(
        (*op)->Forward(x.data(), x.data(), x.data(), w, before.data()).ok());
    if (causal) {
      const float* p = (*op)->probabilities();
      for (int64_t row = 0; row < s.batch * s.heads * s.tq; ++row) {
        const int64_t i = row % s.tq;
        double sum = 0;
        for (int64_t j = 0; j < s.tv; ++j) {
          sum += p[row * s.tv + j];
          if (j > i) {
            ASSERT_EQ(p[row * s.tv + j], 0.0f) << row << "," << j;
          }
        }
        EXPECT_NEAR(sum, 1.0, 1e-6);
      }
    }
    for (int64_t later : {3, 6}) {
      std::vector<float> changed = x, after(before.size());
      for (int64_t n = 0; n < s.batch; ++n) {
        for (int64_t c = 0; c < s.dq; ++c) {
          changed[(n * s.tq + later) * s.dq + c] += 0.5f;
        }
      }
      ASSERT_TRUE((*op)
                      ->Forward(changed.data(), changed.data(), changed.data(),
                                w, after.data())
                      .ok());
      for (int64_t n = 0; n < s.batch; ++n) {
        for (int64_t i = 0; i < later; ++i) {
          const int64_t row = (n * s.tq + i) * s.output_dim;
          const std::vector<float> a(before.begin() + row,
                                     before.begin() + row + s.output_dim);
          const std::vector<float> b(after.begin() + row,
                                     after.begin() + row + s.output_dim);
          if (causal) {
            EXPECT_EQ(a, b) << "batch " << n << " position " << i;
          } else {
            EXPECT_NE(a, b) << "batch " << n << " position " << i;
          }
        }
      }
    }
  }
}

TEST(AttentionOp, RejectsBadShapesAndArguments) {
  std::unique_ptr<Engine> engine = MakeEngine();
  auto code = [&](const AttentionShape& s) {
    return AttentionOp::Create(s, engine.get()).status().code();
  };
  EXPECT_EQ(code(Shape(2, 3, 4, 5, 6, 7, 0, 3)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Shape(2, -3, 4, 5, 6, 7, 2, 3)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Shape(2, 3, 4, 5, 6, 7, 2, 3, -1)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Shape(int64_t{1} << 40, 1 << 20, 1 << 20, 4, 4, 4, 2, 2)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Shape(1, 2, 2, 2, 2, 2, int64_t{1} << 62, 4)),
            absl::StatusCode::kInvalidArgument);
  AttentionShape dropout = Shape(2, 3, 4, 5, 6, 7, 2, 3);
  dropout.dropout = 0.1;
  EXPECT_EQ(code(dropout), absl::StatusCode::kUnimplemented);
  dropout.dropout = 1.0;
  EXPECT_EQ(code(dropout), absl::StatusCode::kInvalidArgument);

  // dk != dv: the key's and the value's gradients cannot share a buffer.
  AttentionShape s = Shape(1, 2, 3, 4, 5, 6, 2, 2);
  absl::StatusOr<std::unique_ptr<AttentionOp>> op =
      AttentionOp::Create(s, engine.get());
  ASSERT_TRUE(op.ok()) << op.status();
  Tensors<float> t = RandomTensors((*op)->shape(), 3);
  AttentionWeights w = WeightsOf(t, true);
  std::vector<float> y(2 * 4), dy(2 * 4, 1.0f), dkv(3 * 6);
  const float* q = t["query"].data();
  const float* k = t["key"].data();
  const float* v = t["value"].data();
  AttentionWeights no_bias = WeightsOf(t, false);
  EXPECT_EQ((*op)->Forward(q, k, v, no_bias, y.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*op)->Forward(nullptr, k, v, w, y.data()).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*op)->Forward(q, k, v, w, y.data()).ok());
  Tensors<float> g;
  AttentionGradients grads = GradientsOf((*op)->shape(), &g);
  grads.key = grads.value = dkv.data();
  EXPECT_EQ((*op)->Backward(q, k, v, w, dy.data(), grads).code(),
            absl::StatusCode::kInvalidArgument);
  grads.key = grads.value = nullptr;
  ASSERT_TRUE((*op)->Backward(q, k, v, w, dy.data(), grads).ok());
  grads.query_bias = nullptr;
  EXPECT_EQ((*op)->Backward(q, k, v, w, dy.data(), grads).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

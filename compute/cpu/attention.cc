#include "compute/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "compute/attention_checks.h"
#include "compute/cpu/dnnl_util.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

constexpr char kOp[] = "MultiHeadAttention";
// No buffer holds more elements (16 TiB of floats): it could not be
// allocated, and sizes stay far from int64 overflow.
constexpr int64_t kMaxElements = int64_t{1} << 42;

// a * b * ..., or -1 past kMaxElements.
int64_t Elements(std::initializer_list<int64_t> sizes) {
  int64_t product = 1;
  for (int64_t size : sizes) {
    if (size > kMaxElements / product) return -1;
    product *= size;
  }
  return product;
}

// The per-head view [B, H, T, D] of a projection stored as [B, T, H, D].
memory::desc Heads(int64_t b, int64_t h, int64_t t, int64_t d) {
  return memory::desc({b, h, t, d}, memory::data_type::f32,
                      memory::dims{t * h * d, d, h * d, 1});
}

// The same projection as its per-head transpose [B, H, D, T].
memory::desc HeadsT(int64_t b, int64_t h, int64_t t, int64_t d) {
  return memory::desc({b, h, d, t}, memory::data_type::f32,
                      memory::dims{t * h * d, d, 1, h * d});
}

// Scores [B, H, Tq, Tv] as they are stored, and as [B, H, Tv, Tq].
memory::desc Scores(int64_t b, int64_t h, int64_t tq, int64_t tv) {
  return F32Desc({b, h, tq, tv}, Tag::abcd);
}
memory::desc ScoresT(int64_t b, int64_t h, int64_t tq, int64_t tv) {
  return F32Desc({b, h, tv, tq}, Tag::abdc);
}

// Sums the rows of x [rows, cols] into sum [cols].
void ColumnSums(const float* x, int64_t rows, int64_t cols, float* sum) {
  std::copy(x, x + cols, sum);
  for (int64_t r = 1; r < rows; ++r) {
    const float* row = x + r * cols;
    for (int64_t c = 0; c < cols; ++c) sum[c] += row[c];
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<AttentionOp>> AttentionOp::Create(
    const AttentionShape& requested, Engine* engine) {
  const AttentionShape s = AttentionWithDefaults(requested);
  absl::Status status = CheckPositive(kOp, PositiveSizes(s));
  if (status.ok()) status = CheckAttentionDropout(s);
  if (!status.ok()) return status;
  const int64_t b = s.batch, h = s.heads;
  for (int64_t n : {Elements({b, h, s.tq, s.tv}),
                    Elements({b, s.tq, h, std::max(s.key_dim, s.value_dim)}),
                    Elements({b, s.tv, h, std::max(s.key_dim, s.value_dim)}),
                    Elements({b, s.tq, std::max(s.dq, s.output_dim)}),
                    Elements({b, s.tv, std::max(s.dk, s.dv)}),
                    Elements({std::max({s.dq, s.dk, s.dv}), h, s.key_dim}),
                    Elements({std::max(s.dv, s.output_dim), h, s.value_dim})}) {
    if (n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": sizes too large to allocate"));
    }
  }
  std::unique_ptr<AttentionOp> op(new AttentionOp(s, engine));
  status = op->Init();
  if (!status.ok()) return status;
  return op;
}

std::vector<AttentionVariable> AttentionOp::Variables(
    const AttentionShape& requested) {
  const AttentionShape s = AttentionWithDefaults(requested);
  const int64_t h = s.heads, dk = s.key_dim, dv = s.value_dim;
  std::vector<AttentionVariable> variables;
  auto add = [&](const char* layer, std::vector<int64_t> kernel,
                 std::vector<int64_t> bias) {
    variables.push_back({absl::StrCat(layer, "/kernel"), std::move(kernel)});
    if (s.use_bias) {
      variables.push_back({absl::StrCat(layer, "/bias"), std::move(bias)});
    }
  };
  add("query", {s.dq, h, dk}, {h, dk});
  add("key", {s.dk, h, dk}, {h, dk});
  add("value", {s.dv, h, dv}, {h, dv});
  add("attention_output", {h, dv, s.output_dim}, {s.output_dim});
  return variables;
}

AttentionOp::Matmul AttentionOp::MakeMatmul(const dnnl::engine& e,
                                            const memory::desc& src,
                                            const memory::desc& weights,
                                            const memory::desc* bias,
                                            const memory::desc& dst,
                                            float scale, bool accumulate) {
  dnnl::primitive_attr attr = UserScratchpadAttr();
  if (scale != 1.0f) attr.set_output_scales(0, {scale});
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd(
      bias != nullptr ? dnnl::matmul::desc(src, weights, *bias, dst)
                      : dnnl::matmul::desc(src, weights, dst),
      attr, e);
  Matmul m;
  m.primitive = dnnl::matmul(pd);
  m.src = UserMemory(src, e);
  m.weights = UserMemory(weights, e);
  m.dst = UserMemory(dst, e);
  m.args = {{DNNL_ARG_SRC, m.src},
            {DNNL_ARG_WEIGHTS, m.weights},
            {DNNL_ARG_DST, m.dst}};
  if (bias != nullptr) {
    m.bias = UserMemory(*bias, e);
    m.args[DNNL_ARG_BIAS] = m.bias;
  }
  AddScratchpad(pd, e, &m.args);
  return m;
}

absl::Status AttentionOp::Init() {
  return Guard("MultiHeadAttention: create", [&]() -> absl::Status {
    engine_->UseThreads();
    const dnnl::engine& e = engine_->dnnl_engine();
    const AttentionShape& s = shape_;
    const int64_t b = s.batch, tq = s.tq, tv = s.tv, h = s.heads;
    const int64_t hk = h * s.key_dim, hv = h * s.value_dim, o = s.output_dim;
    const int64_t rq = b * tq, rv = b * tv;
    const float scale = static_cast<float>(1.0 / std::sqrt(s.key_dim));

    q_.resize(rq * hk);
    k_.resize(rv * hk);
    v_.resize(rv * hv);
    probs_.resize(b * h * tq * tv);
    context_.resize(rq * hv);
    d_context_.resize(rq * hv);
    d_probs_.resize(probs_.size());
    d_q_.resize(q_.size());
    d_k_.resize(k_.size());
    d_v_.resize(v_.size());

    // Row-major matrices, their transposes (read through strides) and the
    // biases as [1, N] rows.
    auto mat = [](int64_t r, int64_t c) { return F32Desc({r, c}, Tag::ab); };
    auto mat_t = [](int64_t r, int64_t c) { return F32Desc({r, c}, Tag::ba); };
    const memory::desc bq = mat(1, hk), bv = mat(1, hv), bo = mat(1, o);
    const memory::desc* no_bias = nullptr;
    const bool ub = s.use_bias;

    query_proj_ = MakeMatmul(e, mat(rq, s.dq), mat(s.dq, hk),
                             ub ? &bq : no_bias, mat(rq, hk));
    key_proj_ = MakeMatmul(e, mat(rv, s.dk), mat(s.dk, hk), ub ? &bq : no_bias,
                           mat(rv, hk));
    value_proj_ = MakeMatmul(e, mat(rv, s.dv), mat(s.dv, hv),
                             ub ? &bv : no_bias, mat(rv, hv));
    scores_ =
        MakeMatmul(e, Heads(b, h, tq, s.key_dim), HeadsT(b, h, tv, s.key_dim),
                   no_bias, Scores(b, h, tq, tv), scale);
    combine_ = MakeMatmul(e, Scores(b, h, tq, tv), Heads(b, h, tv, s.value_dim),
                          no_bias, Heads(b, h, tq, s.value_dim));
    output_proj_ =
        MakeMatmul(e, mat(rq, hv), mat(hv, o), ub ? &bo : no_bias, mat(rq, o));

    d_output_kernel_ =
        MakeMatmul(e, mat_t(hv, rq), mat(rq, o), no_bias, mat(hv, o));
    d_context_mm_ =
        MakeMatmul(e, mat(rq, o), mat_t(o, hv), no_bias, mat(rq, hv));
    d_probs_mm_ = MakeMatmul(e, Heads(b, h, tq, s.value_dim),
                             HeadsT(b, h, tv, s.value_dim), no_bias,
                             Scores(b, h, tq, tv));
    d_v_mm_ = MakeMatmul(e, ScoresT(b, h, tq, tv), Heads(b, h, tq, s.value_dim),
                         no_bias, Heads(b, h, tv, s.value_dim));
    d_q_mm_ = MakeMatmul(e, Scores(b, h, tq, tv), Heads(b, h, tv, s.key_dim),
                         no_bias, Heads(b, h, tq, s.key_dim), scale);
    d_k_mm_ = MakeMatmul(e, ScoresT(b, h, tq, tv), Heads(b, h, tq, s.key_dim),
                         no_bias, Heads(b, h, tv, s.key_dim), scale);
    d_query_kernel_ =
        MakeMatmul(e, mat_t(s.dq, rq), mat(rq, hk), no_bias, mat(s.dq, hk));
    d_key_kernel_ =
        MakeMatmul(e, mat_t(s.dk, rv), mat(rv, hk), no_bias, mat(s.dk, hk));
    d_value_kernel_ =
        MakeMatmul(e, mat_t(s.dv, rv), mat(rv, hv), no_bias, mat(s.dv, hv));

    d_value_ =
        MakeMatmul(e, mat(rv, hv), mat_t(hv, s.dv), no_bias, mat(rv, s.dv));
    d_key_ =
        MakeMatmul(e, mat(rv, hk), mat_t(hk, s.dk), no_bias, mat(rv, s.dk));
    if (s.dk == s.dv) {
      d_key_sum_ = MakeMatmul(e, mat(rv, hk), mat_t(hk, s.dk), no_bias,
                              mat(rv, s.dk), 1.0f, /*accumulate=*/true);
    }
    d_query_ =
        MakeMatmul(e, mat(rq, hk), mat_t(hk, s.dq), no_bias, mat(rq, s.dq));
    if (tq == tv && (s.dq == s.dv || s.dq == s.dk)) {
      d_query_sum_ = MakeMatmul(e, mat(rq, hk), mat_t(hk, s.dq), no_bias,
                                mat(rq, s.dq), 1.0f, /*accumulate=*/true);
    }

    // Softmax over Tv, in place: P over the scores, dS over dP.
    const memory::desc rows = mat(b * h * tq, tv);
    probs_mem_ = memory(rows, e, probs_.data());
    d_probs_mem_ = memory(rows, e, d_probs_.data());
    dnnl::primitive_attr attr = UserScratchpadAttr();
    dnnl::softmax_forward::primitive_desc fwd_pd(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, rows, 1),
        attr, e);
    softmax_fwd_ = dnnl::softmax_forward(fwd_pd);
    softmax_fwd_args_ = {{DNNL_ARG_SRC, probs_mem_},
                         {DNNL_ARG_DST, probs_mem_}};
    AddScratchpad(fwd_pd, e, &softmax_fwd_args_);
    dnnl::softmax_backward::primitive_desc bwd_pd(
        dnnl::softmax_backward::desc(rows, rows, 1), attr, e, fwd_pd);
    softmax_bwd_ = dnnl::softmax_backward(bwd_pd);
    softmax_bwd_args_ = {{DNNL_ARG_DST, probs_mem_},
                         {DNNL_ARG_DIFF_DST, d_probs_mem_},
                         {DNNL_ARG_DIFF_SRC, d_probs_mem_}};
    AddScratchpad(bwd_pd, e, &softmax_bwd_args_);
    return absl::OkStatus();
  });
}

absl::Status AttentionOp::Run(const char* what, Matmul& m, const float* src,
                              const float* weights, const float* bias,
                              float* dst) {
  SetHandle(m.src, src);
  SetHandle(m.weights, weights);
  if (bias != nullptr) SetHandle(m.bias, bias);
  SetHandle(m.dst, dst);
  return engine_->Execute(what, m.primitive, m.args);
}

void AttentionOp::MaskScores() {
  const int64_t tq = shape_.tq, tv = shape_.tv;
  const int64_t blocks = shape_.batch * shape_.heads;
  const float masked = -std::numeric_limits<float>::infinity();
  for (int64_t block = 0; block < blocks; ++block) {
    float* scores = probs_.data() + block * tq * tv;
    // Row i keeps key positions 0..i; a row from tv - 1 on keeps them all.
    for (int64_t i = 0; i < tq && i + 1 < tv; ++i) {
      std::fill(scores + i * tv + i + 1, scores + (i + 1) * tv, masked);
    }
  }
}

absl::Status AttentionOp::Forward(const float* query, const float* key,
                                  const float* value, const AttentionWeights& w,
                                  float* y) {
  const absl::Status checked =
      CheckAttentionForward(shape_, query, key, value, w, y);
  if (!checked.ok()) return checked;
  return Guard("MultiHeadAttention forward", [&]() -> absl::Status {
    absl::Status status = Run("MultiHeadAttention query", query_proj_, query,
                              w.query_kernel, w.query_bias, q_.data());
    if (status.ok()) {
      status = Run("MultiHeadAttention key", key_proj_, key, w.key_kernel,
                   w.key_bias, k_.data());
    }
    if (status.ok()) {
      status = Run("MultiHeadAttention value", value_proj_, value,
                   w.value_kernel, w.value_bias, v_.data());
    }
    if (status.ok()) {
      status = Run("MultiHeadAttention scores", scores_, q_.data(), k_.data(),
                   nullptr, probs_.data());
    }
    if (!status.ok()) return status;
    if (shape_.causal) MaskScores();
    status = engine_->Execute("MultiHeadAttention softmax", softmax_fwd_,
                              softmax_fwd_args_);
    if (status.ok()) {
      status = Run("MultiHeadAttention combine", combine_, probs_.data(),
                   v_.data(), nullptr, context_.data());
    }
    if (!status.ok()) return status;
    return Run("MultiHeadAttention output", output_proj_, context_.data(),
               w.output_kernel, w.output_bias, y);
  });
}

absl::Status AttentionOp::Backward(const float* query, const float* key,
                                   const float* value,
                                   const AttentionWeights& w, const float* dy,
                                   const AttentionGradients& g) {
  const absl::Status checked =
      CheckAttentionBackward(shape_, query, key, value, w, dy, g);
  if (!checked.ok()) return checked;
  const AttentionShape& s = shape_;
  const int64_t rq = s.batch * s.tq, rv = s.batch * s.tv;
  const int64_t hk = s.heads * s.key_dim, hv = s.heads * s.value_dim;
  return Guard("MultiHeadAttention backward", [&]() -> absl::Status {
    // Output projection: dWo = C^T dy, dC = dy Wo^T.
    absl::Status status =
        Run("MultiHeadAttention d attention_output/kernel", d_output_kernel_,
            context_.data(), dy, nullptr, g.output_kernel);
    if (status.ok()) {
      status = Run("MultiHeadAttention d context", d_context_mm_, dy,
                   w.output_kernel, nullptr, d_context_.data());
    }
    // Combine: dP = dC V^T, dV = P^T dC; then dS through the softmax.
    if (status.ok()) {
      status = Run("MultiHeadAttention d probabilities", d_probs_mm_,
                   d_context_.data(), v_.data(), nullptr, d_probs_.data());
    }
    if (status.ok()) {
      status = Run("MultiHeadAttention d V", d_v_mm_, probs_.data(),
                   d_context_.data(), nullptr, d_v_.data());
    }
    if (status.ok()) {
      status = engine_->Execute("MultiHeadAttention softmax backward",
                                softmax_bwd_, softmax_bwd_args_);
    }
    // Scores = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q.
    if (status.ok()) {
      status = Run("MultiHeadAttention d Q", d_q_mm_, d_probs_.data(),
                   k_.data(), nullptr, d_q_.data());
    }
    if (status.ok()) {
      status = Run("MultiHeadAttention d K", d_k_mm_, d_probs_.data(),
                   q_.data(), nullptr, d_k_.data());
    }
    // Projections' kernels: dW = input^T dProjection.
    if (status.ok()) {
      status = Run("MultiHeadAttention d query/kernel", d_query_kernel_, query,
                   d_q_.data(), nullptr, g.query_kernel);
    }
    if (status.ok()) {
      status = Run("MultiHeadAttention d key/kernel", d_key_kernel_, key,
                   d_k_.data(), nullptr, g.key_kernel);
    }
    if (status.ok()) {
      status = Run("MultiHeadAttention d value/kernel", d_value_kernel_, value,
                   d_v_.data(), nullptr, g.value_kernel);
    }
    if (!status.ok()) return status;
    if (s.use_bias) {
      ColumnSums(dy, rq, s.output_dim, g.output_bias);
      ColumnSums(d_q_.data(), rq, hk, g.query_bias);
      ColumnSums(d_k_.data(), rv, hk, g.key_bias);
      ColumnSums(d_v_.data(), rv, hv, g.value_bias);
    }
    return InputGradients(w, g);
  });
}

absl::Status AttentionOp::InputGradients(const AttentionWeights& w,
                                         const AttentionGradients& g) {
  // value first; key and query add into a buffer an earlier one wrote.
  absl::Status status;
  if (g.value != nullptr) {
    status = Run("MultiHeadAttention d value", d_value_, d_v_.data(),
                 w.value_kernel, nullptr, g.value);
    if (!status.ok()) return status;
  }
  if (g.key != nullptr) {
    Matmul& m = g.key == g.value ? d_key_sum_ : d_key_;
    status = Run("MultiHeadAttention d key", m, d_k_.data(), w.key_kernel,
                 nullptr, g.key);
    if (!status.ok()) return status;
  }
  if (g.query != nullptr) {
    Matmul& m =
        g.query == g.value || g.query == g.key ? d_query_sum_ : d_query_;
    status = Run("MultiHeadAttention d query", m, d_q_.data(), w.query_kernel,
                 nullptr, g.query);
  }
  return status;
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

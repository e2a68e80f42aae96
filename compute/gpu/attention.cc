#include "compute/gpu/attention.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/attention_checks.h"
#include "compute/gpu/kernels.h"
#include "compute/gpu/norm_attention_kernels.h"
#include "compute/gpu/shape_check.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr char kOp[] = "MultiHeadAttention";

cublasOperation_t Op(bool transpose) {
  return transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
}

// Row-major C [m, n] = alpha op(A) [m, k] op(B) [k, n] + beta C, with
// leading dimensions (row lengths as stored) lda, ldb, ldc. cuBLAS is
// column-major, where the stored row-major C is C^T: it computes
// C^T = op(B)^T op(A)^T, i.e. B first.
absl::Status Gemm(Device* device, const char* what, bool trans_a, bool trans_b,
                  int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta,
                  float* c, int64_t ldc) {
  return CublasStatus(
      cublasSgemm(device->cublas(), Op(trans_b), Op(trans_a),
                  static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                  &alpha, b, static_cast<int>(ldb), a, static_cast<int>(lda),
                  &beta, c, static_cast<int>(ldc)),
      absl::StrCat(kOp, " ", what, ": cublasSgemm"));
}

// One row-major matrix of A, B and C per head, `count` of them, each
// `stride_*` elements after the previous.
struct Batched {
  const float* a;
  int64_t lda, stride_a;
  const float* b;
  int64_t ldb, stride_b;
  float* c;
  int64_t ldc, stride_c;
};

absl::Status BatchedGemm(Device* device, const char* what, bool trans_a,
                         bool trans_b, int64_t m, int64_t n, int64_t k,
                         float alpha, const Batched& x, int64_t count) {
  const float beta = 0.0f;
  return CublasStatus(
      cublasSgemmStridedBatched(
          device->cublas(), Op(trans_b), Op(trans_a), static_cast<int>(n),
          static_cast<int>(m), static_cast<int>(k), &alpha, x.b,
          static_cast<int>(x.ldb), x.stride_b, x.a, static_cast<int>(x.lda),
          x.stride_a, &beta, x.c, static_cast<int>(x.ldc), x.stride_c,
          static_cast<int>(count)),
      absl::StrCat(kOp, " ", what, ": cublasSgemmStridedBatched"));
}

absl::Status Launched(cudaError_t error, const char* what) {
  return CudaStatus(error, absl::StrCat(kOp, " ", what));
}

}  // namespace

AttentionOp::Sizes AttentionOp::SizesOf(const AttentionShape& s) {
  Sizes z;
  z.b = s.batch;
  z.h = s.heads;
  z.tq = s.tq;
  z.tv = s.tv;
  z.dk = s.key_dim;
  z.dv = s.value_dim;
  z.o = s.output_dim;
  z.rq = z.b * z.tq;
  z.rv = z.b * z.tv;
  z.hk = z.h * z.dk;
  z.hv = z.h * z.dv;
  z.scale = static_cast<float>(1.0 / std::sqrt(s.key_dim));
  return z;
}

absl::StatusOr<std::unique_ptr<AttentionOp>> AttentionOp::Create(
    const AttentionShape& requested, Device* device) {
  const AttentionShape s = AttentionWithDefaults(requested);
  PSTRAIN_RETURN_IF_ERROR(CheckDims(kOp, cpu::PositiveSizes(s)));
  PSTRAIN_RETURN_IF_ERROR(CheckAttentionDropout(s));
  const int64_t b = s.batch, h = s.heads, dk = s.key_dim, dv = s.value_dim;
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "query", {b, s.tq, s.dq}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "key", {b, s.tv, s.dk}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "value", {b, s.tv, s.dv}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "y", {b, s.tq, s.output_dim}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "Q", {b, s.tq, h, dk}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "K", {b, s.tv, h, dk}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "V", {b, s.tv, h, dv}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "C", {b, s.tq, h, dv}));
  PSTRAIN_RETURN_IF_ERROR(
      CheckElements(kOp, "the attention scores", {b, h, s.tq, s.tv}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "query/kernel", {s.dq, h, dk}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "key/kernel", {s.dk, h, dk}));
  PSTRAIN_RETURN_IF_ERROR(CheckElements(kOp, "value/kernel", {s.dv, h, dv}));
  PSTRAIN_RETURN_IF_ERROR(
      CheckElements(kOp, "attention_output/kernel", {h, dv, s.output_dim}));
  PSTRAIN_RETURN_IF_ERROR(CheckDevice(kOp, device));
  std::unique_ptr<AttentionOp> op(new AttentionOp(s, device));
  PSTRAIN_RETURN_IF_ERROR(op->Allocate());
  return op;
}

absl::Status AttentionOp::Allocate() {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  const AttentionShape& s = shape_;
  const int64_t rq = s.batch * s.tq, rv = s.batch * s.tv;
  const int64_t hk = s.heads * s.key_dim, hv = s.heads * s.value_dim;
  const int64_t scores = s.batch * s.heads * s.tq * s.tv;
  const int64_t staging = std::max({rq * hk, rv * hk, rv * hv, rq * hv});
  struct Request {
    DeviceBuffer* buffer;
    int64_t floats;
  };
  for (const Request& r :
       {Request{&q_, rq * hk}, Request{&k_, rv * hk}, Request{&v_, rv * hv},
        Request{&probs_, scores}, Request{&context_, rq * hv},
        Request{&staging_, staging}, Request{&d_context_, rq * hv},
        Request{&d_q_heads_, rq * hk}, Request{&d_k_heads_, rv * hk},
        Request{&d_v_heads_, rv * hv}, Request{&d_probs_, scores},
        Request{&d_q_, rq * hk}, Request{&d_k_, rv * hk},
        Request{&d_v_, rv * hv}}) {
    PSTRAIN_ASSIGN_OR_RETURN(*r.buffer,
                             device_->Allocate(r.floats * sizeof(float)));
  }
  return absl::OkStatus();
}

absl::Status AttentionOp::Forward(const float* query, const float* key,
                                  const float* value, const AttentionWeights& w,
                                  float* y) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckAttentionForward(shape_, query, key, value, w, y));
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  const AttentionShape& s = shape_;
  const auto [b, h, tq, tv, dk, dv, o, rq, rv, hk, hv, scale] = sizes_;
  cudaStream_t stream = device_->stream();
  float* staging = staging_.floats();

  // The projections, each into the staging rows, then split into heads with
  // its bias added.
  PSTRAIN_RETURN_IF_ERROR(Gemm(device_, "query", false, false, rq, hk, s.dq,
                               1.0f, query, s.dq, w.query_kernel, hk, 0.0f,
                               staging, hk));
  PSTRAIN_RETURN_IF_ERROR(
      Launched(LaunchSplitHeads(staging, w.query_bias, b, tq, h, dk,
                                q_.floats(), stream),
               "query heads"));
  PSTRAIN_RETURN_IF_ERROR(Gemm(device_, "key", false, false, rv, hk, s.dk, 1.0f,
                               key, s.dk, w.key_kernel, hk, 0.0f, staging, hk));
  PSTRAIN_RETURN_IF_ERROR(Launched(
      LaunchSplitHeads(staging, w.key_bias, b, tv, h, dk, k_.floats(), stream),
      "key heads"));
  PSTRAIN_RETURN_IF_ERROR(Gemm(device_, "value", false, false, rv, hv, s.dv,
                               1.0f, value, s.dv, w.value_kernel, hv, 0.0f,
                               staging, hv));
  PSTRAIN_RETURN_IF_ERROR(
      Launched(LaunchSplitHeads(staging, w.value_bias, b, tv, h, dv,
                                v_.floats(), stream),
               "value heads"));

  // Per head: S = scale Q K^T [Tq, Tv], P = softmax(S) in place.
  PSTRAIN_RETURN_IF_ERROR(
      BatchedGemm(device_, "scores", false, true, tq, tv, dk, scale,
                  {q_.floats(), dk, tq * dk, k_.floats(), dk, tv * dk,
                   probs_.floats(), tv, tq * tv},
                  b * h));
  PSTRAIN_RETURN_IF_ERROR(Launched(
      LaunchAttentionSoftmax(probs_.floats(), b * h, tq, tv, s.causal, stream),
      "softmax"));
  // C = P V per head into staging, merged into [B, Tq, H, Dv].
  PSTRAIN_RETURN_IF_ERROR(
      BatchedGemm(device_, "combine", false, false, tq, dv, tv, 1.0f,
                  {probs_.floats(), tv, tq * tv, v_.floats(), dv, tv * dv,
                   staging, dv, tq * dv},
                  b * h));
  PSTRAIN_RETURN_IF_ERROR(Launched(
      LaunchMergeHeads(staging, b, tq, h, dv, context_.floats(), stream),
      "context"));
  // y = C Wo + bo.
  PSTRAIN_RETURN_IF_ERROR(Gemm(device_, "output", false, false, rq, o, hv, 1.0f,
                               context_.floats(), hv, w.output_kernel, o, 0.0f,
                               y, o));
  if (!s.use_bias) return absl::OkStatus();
  return Launched(LaunchBiasAdd(w.output_bias, rq, o, y, stream),
                  "output bias");
}

absl::Status AttentionOp::Backward(const float* query, const float* key,
                                   const float* value,
                                   const AttentionWeights& w, const float* dy,
                                   const AttentionGradients& g) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckAttentionBackward(shape_, query, key, value, w, dy, g));
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  const AttentionShape& s = shape_;
  const auto [b, h, tq, tv, dk, dv, o, rq, rv, hk, hv, scale] = sizes_;
  cudaStream_t stream = device_->stream();
  float* staging = staging_.floats();

  // Output projection: dWo = C^T dy; dC = dy Wo^T, split into heads.
  PSTRAIN_RETURN_IF_ERROR(Gemm(device_, "d attention_output/kernel", true,
                               false, hv, o, rq, 1.0f, context_.floats(), hv,
                               dy, o, 0.0f, g.output_kernel, o));
  PSTRAIN_RETURN_IF_ERROR(Gemm(device_, "d context", false, true, rq, hv, o,
                               1.0f, dy, o, w.output_kernel, o, 0.0f, staging,
                               hv));
  PSTRAIN_RETURN_IF_ERROR(
      Launched(LaunchSplitHeads(staging, nullptr, b, tq, h, dv,
                                d_context_.floats(), stream),
               "d context heads"));
  // Combine: dP = dC V^T, dV = P^T dC; then dS through the softmax.
  PSTRAIN_RETURN_IF_ERROR(
      BatchedGemm(device_, "d probabilities", false, true, tq, tv, dv, 1.0f,
                  {d_context_.floats(), dv, tq * dv, v_.floats(), dv, tv * dv,
                   d_probs_.floats(), tv, tq * tv},
                  b * h));
  PSTRAIN_RETURN_IF_ERROR(
      BatchedGemm(device_, "d V", true, false, tv, dv, tq, 1.0f,
                  {probs_.floats(), tv, tq * tv, d_context_.floats(), dv,
                   tq * dv, d_v_heads_.floats(), dv, tv * dv},
                  b * h));
  PSTRAIN_RETURN_IF_ERROR(
      Launched(LaunchAttentionSoftmaxBackward(probs_.floats(), b * h * tq, tv,
                                              d_probs_.floats(), stream),
               "softmax backward"));
  // Scores = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q.
  PSTRAIN_RETURN_IF_ERROR(
      BatchedGemm(device_, "d Q", false, false, tq, dk, tv, scale,
                  {d_probs_.floats(), tv, tq * tv, k_.floats(), dk, tv * dk,
                   d_q_heads_.floats(), dk, tq * dk},
                  b * h));
  PSTRAIN_RETURN_IF_ERROR(
      BatchedGemm(device_, "d K", true, false, tv, dk, tq, scale,
                  {d_probs_.floats(), tv, tq * tv, q_.floats(), dk, tq * dk,
                   d_k_heads_.floats(), dk, tv * dk},
                  b * h));
  // Back to the projections' rows [B, T, H, D].
  PSTRAIN_RETURN_IF_ERROR(
      Launched(LaunchMergeHeads(d_q_heads_.floats(), b, tq, h, dk,
                                d_q_.floats(), stream),
               "d Q rows"));
  PSTRAIN_RETURN_IF_ERROR(
      Launched(LaunchMergeHeads(d_k_heads_.floats(), b, tv, h, dk,
                                d_k_.floats(), stream),
               "d K rows"));
  PSTRAIN_RETURN_IF_ERROR(
      Launched(LaunchMergeHeads(d_v_heads_.floats(), b, tv, h, dv,
                                d_v_.floats(), stream),
               "d V rows"));
  // Projections' kernels: dW = input^T dProjection.
  PSTRAIN_RETURN_IF_ERROR(Gemm(device_, "d query/kernel", true, false, s.dq, hk,
                               rq, 1.0f, query, s.dq, d_q_.floats(), hk, 0.0f,
                               g.query_kernel, hk));
  PSTRAIN_RETURN_IF_ERROR(Gemm(device_, "d key/kernel", true, false, s.dk, hk,
                               rv, 1.0f, key, s.dk, d_k_.floats(), hk, 0.0f,
                               g.key_kernel, hk));
  PSTRAIN_RETURN_IF_ERROR(Gemm(device_, "d value/kernel", true, false, s.dv, hv,
                               rv, 1.0f, value, s.dv, d_v_.floats(), hv, 0.0f,
                               g.value_kernel, hv));
  if (s.use_bias) {
    PSTRAIN_RETURN_IF_ERROR(
        Launched(LaunchBiasGrad(dy, rq, o, g.output_bias, stream),
                 "d attention_output/bias"));
    PSTRAIN_RETURN_IF_ERROR(
        Launched(LaunchBiasGrad(d_q_.floats(), rq, hk, g.query_bias, stream),
                 "d query/bias"));
    PSTRAIN_RETURN_IF_ERROR(
        Launched(LaunchBiasGrad(d_k_.floats(), rv, hk, g.key_bias, stream),
                 "d key/bias"));
    PSTRAIN_RETURN_IF_ERROR(
        Launched(LaunchBiasGrad(d_v_.floats(), rv, hv, g.value_bias, stream),
                 "d value/bias"));
  }
  return InputGradients(w, g);
}

absl::Status AttentionOp::InputGradients(const AttentionWeights& w,
                                         const AttentionGradients& g) {
  const AttentionShape& s = shape_;
  const int64_t rq = sizes_.rq, rv = sizes_.rv, hk = sizes_.hk, hv = sizes_.hv;
  // value first; key and query add into a buffer an earlier one wrote.
  if (g.value != nullptr) {
    PSTRAIN_RETURN_IF_ERROR(Gemm(device_, "d value", false, true, rv, s.dv, hv,
                                 1.0f, d_v_.floats(), hv, w.value_kernel, hv,
                                 0.0f, g.value, s.dv));
  }
  if (g.key != nullptr) {
    const float beta = g.key == g.value ? 1.0f : 0.0f;
    PSTRAIN_RETURN_IF_ERROR(Gemm(device_, "d key", false, true, rv, s.dk, hk,
                                 1.0f, d_k_.floats(), hk, w.key_kernel, hk,
                                 beta, g.key, s.dk));
  }
  if (g.query != nullptr) {
    const float beta = g.query == g.value || g.query == g.key ? 1.0f : 0.0f;
    PSTRAIN_RETURN_IF_ERROR(Gemm(device_, "d query", false, true, rq, s.dq, hk,
                                 1.0f, d_q_.floats(), hk, w.query_kernel, hk,
                                 beta, g.query, s.dq));
  }
  return absl::OkStatus();
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

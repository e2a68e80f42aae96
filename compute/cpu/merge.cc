#include "compute/cpu/merge.h"

#include <algorithm>
#include <cstring>

#include "compute/cpu/parallel.h"

namespace pstrain {
namespace worker {
namespace cpu {

namespace {

void MergeForwardRange(MergeOp op, absl::Span<const float* const> x,
                       int64_t begin, int64_t end, float* y) {
  const size_t k = x.size();
  if (op == MergeOp::kAdd && k == 2) {  // The residual Add: vectorized.
    const float* a = x[0];
    const float* b = x[1];
    for (int64_t i = begin; i < end; ++i) y[i] = a[i] + b[i];
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    float v = x[0][i];
    for (size_t j = 1; j < k; ++j) {
      const float xj = x[j][i];
      switch (op) {
        case MergeOp::kAdd:
        case MergeOp::kAverage:
          v += xj;
          break;
        case MergeOp::kSubtract:
          v -= xj;
          break;
        case MergeOp::kMultiply:
          v *= xj;
          break;
        case MergeOp::kMaximum:
          v = std::max(v, xj);
          break;
        case MergeOp::kMinimum:
          v = std::min(v, xj);
          break;
      }
    }
    y[i] = op == MergeOp::kAverage ? v / static_cast<float>(k) : v;
  }
}

void MergeBackwardRange(MergeOp op, absl::Span<const float* const> x,
                        const float* dy, int64_t begin, int64_t end, int which,
                        float* dx) {
  const int k = static_cast<int>(x.size());
  if (op == MergeOp::kAdd) {  // dx = dy.
    std::memcpy(dx + begin, dy + begin, (end - begin) * sizeof(float));
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    float g = dy[i];
    switch (op) {
      case MergeOp::kAdd:
        break;
      case MergeOp::kAverage:
        g /= static_cast<float>(k);
        break;
      case MergeOp::kSubtract:
        if (which == 1) g = -g;
        break;
      case MergeOp::kMultiply:
        for (int j = 0; j < k; ++j) {
          if (j != which) g *= x[j][i];
        }
        break;
      case MergeOp::kMaximum:
      case MergeOp::kMinimum: {
        int best = 0;
        for (int j = 1; j < k; ++j) {
          const bool better = op == MergeOp::kMaximum ? x[j][i] > x[best][i]
                                                      : x[j][i] < x[best][i];
          if (better) best = j;
        }
        if (best != which) g = 0;
        break;
      }
    }
    dx[i] = g;
  }
}

}  // namespace

void MergeForward(MergeOp op, absl::Span<const float* const> x, int64_t n,
                  float* y, int num_threads) {
  ParallelFor(num_threads, n, [&](int64_t begin, int64_t end) {
    MergeForwardRange(op, x, begin, end, y);
  });
}

void MergeBackward(MergeOp op, absl::Span<const float* const> x,
                   const float* dy, int64_t n, int which, float* dx,
                   int num_threads) {
  ParallelFor(num_threads, n, [&](int64_t begin, int64_t end) {
    MergeBackwardRange(op, x, dy, begin, end, which, dx);
  });
}

void ConcatForward(absl::Span<const float* const> x,
                   absl::Span<const int64_t> widths, int64_t rows, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < x.size(); ++j) {
      std::memcpy(y, x[j] + r * widths[j], widths[j] * sizeof(float));
      y += widths[j];
    }
  }
}

void ConcatBackward(const float* dy, absl::Span<const int64_t> widths,
                    int64_t rows, int which, float* dx) {
  int64_t offset = 0;
  int64_t row = 0;
  for (size_t j = 0; j < widths.size(); ++j) {
    if (static_cast<int>(j) < which) offset += widths[j];
    row += widths[j];
  }
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dx + r * widths[which], dy + r * row + offset,
                widths[which] * sizeof(float));
  }
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

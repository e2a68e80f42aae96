#include "parallel/variable_slice.h"

#include <algorithm>
#include <cstdint>

namespace pstrain {
namespace parallel {
namespace {

// The variable seen as [outer, dim, inner] around its split dimension.
struct Blocks {
  int64_t outer = 1;
  int64_t dim = 1;
  int64_t inner = 1;
};

Blocks BlocksOf(const MemberVariable& var) {
  Blocks b;
  for (int d = 0; d < static_cast<int>(var.shape.size()); ++d) {
    if (d < var.split_dim) {
      b.outer *= var.shape[d];
    } else if (d == var.split_dim) {
      b.dim = var.shape[d];
    } else {
      b.inner *= var.shape[d];
    }
  }
  return b;
}

// Calls copy(whole offset, part offset, count) for each contiguous run.
template <typename Copy>
void ForEachRun(const MemberVariable& var, Copy copy) {
  if (!var.split()) {
    int64_t n = 1;
    for (int64_t d : var.shape) n *= d;
    copy(0, 0, n);
    return;
  }
  const Blocks b = BlocksOf(var);
  const int64_t width = (var.end - var.begin) * b.inner;
  for (int64_t o = 0; o < b.outer; ++o) {
    copy((o * b.dim + var.begin) * b.inner, o * width, width);
  }
}

}  // namespace

void CopySliceOut(const float* whole, const MemberVariable& var, float* part) {
  ForEachRun(var, [&](int64_t w, int64_t p, int64_t n) {
    std::copy(whole + w, whole + w + n, part + p);
  });
}

void CopySliceIn(const float* part, const MemberVariable& var, float* whole) {
  ForEachRun(var, [&](int64_t w, int64_t p, int64_t n) {
    std::copy(part + p, part + p + n, whole + w);
  });
}

}  // namespace parallel
}  // namespace pstrain

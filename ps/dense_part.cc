#include "ps/dense_part.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ps/variable_error.h"

namespace pstrain {
namespace ps {
namespace {

// The elements of one index of dimension `from` - 1 (product of the later
// dimensions): RowElements is that of dimension 0.
int64_t InnerElements(const VariableDef& def, int from) {
  int64_t n = 1;
  for (int i = from; i < def.shape().dims_size(); ++i) n *= def.shape().dims(i);
  return n;
}

int64_t RowElements(const VariableDef& def) { return InnerElements(def, 1); }

}  // namespace

absl::StatusOr<DensePart> CheckPart(const VariablePart& part,
                                    const VariableDef& def) {
  const int rank = def.shape().dims_size();
  if (def.sparse()) {
    return VariableError(part.name(),
                         "is an embedding table: it is read and written by "
                         "id, not by a part");
  }
  if (rank == 0) {
    return VariableError(part.name(), "is a scalar: it has no part");
  }
  if (part.dim() < 0 || part.dim() >= rank) {
    return VariableError(
        part.name(),
        absl::StrCat("a part cuts one of its ", rank, " dimensions (0 to ",
                     rank - 1, "), not ", part.dim()));
  }
  const int64_t size = def.shape().dims(part.dim());
  if (part.begin() < 0 || part.begin() >= part.end() || part.end() > size) {
    return VariableError(part.name(),
                         absl::StrCat("part [", part.begin(), ", ", part.end(),
                                      ") of dimension ", part.dim(),
                                      " is empty or outside its size ", size));
  }
  return DensePart{part.dim(), part.begin(), part.end()};
}

std::vector<int64_t> PartShape(const VariableDef& def, const DensePart& part) {
  std::vector<int64_t> shape(def.shape().dims().begin(),
                             def.shape().dims().end());
  shape[part.dim] = part.end - part.begin;
  return shape;
}

std::vector<int64_t> HeldShape(const VariableDef& def,
                               const std::map<std::string, DensePart>& parts) {
  auto it = parts.find(def.name());
  if (it != parts.end()) return PartShape(def, it->second);
  return std::vector<int64_t>(def.shape().dims().begin(),
                              def.shape().dims().end());
}

PartRows PartRowsOnPiece(const DensePart& part, const VariableDef& def,
                         int64_t row_begin, int64_t row_end) {
  PartRows rows;
  int64_t row_elements = RowElements(def);
  if (part.dim == 0) {
    const int64_t begin = std::min(std::max(part.begin, row_begin), part.end);
    const int64_t end = std::max(begin, std::min(part.end, row_end));
    rows.begin = begin - part.begin;
    rows.end = end - part.begin;
  } else {
    rows.begin = row_begin;
    rows.end = row_end;
    row_elements =
        row_elements / def.shape().dims(part.dim) * (part.end - part.begin);
  }
  rows.elements = (rows.end - rows.begin) * row_elements;
  return rows;
}

int64_t PieceIndex(const DensePart& part, const VariableDef& def,
                   int64_t row_begin, const PartRows& rows, int64_t k) {
  if (part.dim == 0) {
    return (part.begin + rows.begin - row_begin) * RowElements(def) + k;
  }
  // Per index of the dimensions before part.dim, the part is `width`
  // contiguous elements of every `stride`.
  const int64_t inner = InnerElements(def, part.dim + 1);
  const int64_t width = (part.end - part.begin) * inner;
  const int64_t stride = def.shape().dims(part.dim) * inner;
  return k / width * stride + part.begin * inner + k % width;
}

void CopyPartOut(const DensePart& part, const VariableDef& def,
                 int64_t row_begin, const PartRows& rows, const float* piece,
                 float* out) {
  if (rows.elements == 0) return;
  if (part.dim == 0) {
    const float* from = piece + PieceIndex(part, def, row_begin, rows, 0);
    std::copy(from, from + rows.elements, out);
    return;
  }
  const int64_t inner = InnerElements(def, part.dim + 1);
  const int64_t width = (part.end - part.begin) * inner;
  const int64_t stride = def.shape().dims(part.dim) * inner;
  for (int64_t k = 0, outer = 0; k < rows.elements; k += width, ++outer) {
    const float* from = piece + outer * stride + part.begin * inner;
    std::copy(from, from + width, out + k);
  }
}

}  // namespace ps
}  // namespace pstrain

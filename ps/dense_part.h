// The part of a dense variable a request names (VariablePart in
// proto/ps_service.proto): the range [begin, end) of dimension `dim` (0:
// rows; any other: a range of columns, or of attention heads, in every row). A
// tensor-parallel member pulls and pushes only its part of a split variable
// (parallel/tensor_parallel_plan.h's MemberVariable), so that it never holds
// the whole.
//
// On the wire a part travels as a tensor of the part's shape, of which each
// ps task sends or receives the rows its piece holds (PartRowsOnPiece); the
// ps maps those elements onto its piece (PieceIndex).
//
//   PSTRAIN_ASSIGN_OR_RETURN(DensePart part, CheckPart(request.parts(0), def));
//   PartRows rows = PartRowsOnPiece(part, def, row_begin, row_end);
//   for (int64_t k = 0; k < rows.elements; ++k)
//     piece[PieceIndex(part, def, row_begin, rows, k)] += gradient[k];
#ifndef PSTRAIN_PS_DENSE_PART_H_
#define PSTRAIN_PS_DENSE_PART_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps_service.pb.h"
#include "proto/training.pb.h"

namespace pstrain {
namespace ps {

struct DensePart {
  int dim = 0;
  int64_t begin = 0;
  int64_t end = 0;
  bool operator==(const DensePart& o) const {
    return dim == o.dim && begin == o.begin && end == o.end;
  }
};

// `part` of `def`, checked: INVALID_ARGUMENT naming the variable for a
// scalar, an embedding table (sparse: read and written by id), a dim out of
// the variable's rank, or a range outside [0, dims[dim]) or empty.
absl::StatusOr<DensePart> CheckPart(const VariablePart& part,
                                    const VariableDef& def);

// The part's shape: def's with dims[dim] = end - begin.
std::vector<int64_t> PartShape(const VariableDef& def, const DensePart& part);

// What a holder of `parts` (by variable name) holds of `def`: its part's
// shape, or the whole's.
std::vector<int64_t> HeldShape(const VariableDef& def,
                               const std::map<std::string, DensePart>& parts);

// The rows of the part that a piece holding rows [row_begin, row_end) of
// the whole holds: [begin, end) in the part's rows (begin == end: none),
// and their elements.
struct PartRows {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t elements = 0;
};
PartRows PartRowsOnPiece(const DensePart& part, const VariableDef& def,
                         int64_t row_begin, int64_t row_end);

// Where element k (row-major, from the first of `rows`) of the part's rows
// on a piece starting at whole row `row_begin` lies in the piece's data.
// REQUIRES: 0 <= k < rows.elements.
int64_t PieceIndex(const DensePart& part, const VariableDef& def,
                   int64_t row_begin, const PartRows& rows, int64_t k);

// Copies the part's rows on the piece out of the piece's data `piece` into
// `out` (rows.elements floats).
void CopyPartOut(const DensePart& part, const VariableDef& def,
                 int64_t row_begin, const PartRows& rows, const float* piece,
                 float* out);

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_DENSE_PART_H_

// The tensors a model is fed from a Criteo batch (criteo_reader.h), by the
// name of the model's input, as issue 18 lays out: an input named "dense"
// gets the 13 transformed integer features, one named "sparse" the 26 ids,
// and a model with one input per field gets "I1".."I13" and "C1".."C26"
// one column each. The label is fed as the target of a one-unit sigmoid
// output.
//
//   PSTRAIN_ASSIGN_OR_RETURN(Tensor sparse, CriteoInputTensor(batch,
//   "sparse")); PSTRAIN_ASSIGN_OR_RETURN(Tensor labels,
//   CriteoLabelTensor(batch));
//
// Ids are uint64; a Tensor has no unsigned 64-bit type, so they travel as
// DT_INT64 with the same bits (an id of 2^63 or more reads as negative).
#ifndef PSTRAIN_DATA_CRITEO_FEED_H_
#define PSTRAIN_DATA_CRITEO_FEED_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tensor.h"
#include "data/criteo_reader.h"

namespace pstrain {
namespace data {

// Whether a model input named `name` can be fed from a Criteo batch.
bool IsCriteoInput(absl::string_view name);

// The batch's values for the input `name`, B = batch.size() rows:
//   "dense"   float32 [B, 13]   log(1 + max(I_j, 0)), 0 when missing
//   "sparse"  int64   [B, 26]   ids of C1..C26 (criteo_hash.h)
//   "I<j>"    float32 [B, 1]    one integer feature, j in 1..13
//   "C<k>"    int64   [B, 1]    one categorical feature's id, k in 1..26
// INVALID_ARGUMENT naming `name` and the accepted names for any other.
absl::StatusOr<Tensor> CriteoInputTensor(const CriteoBatch& batch,
                                         absl::string_view name);

// The labels as float32 [B, 1] (0 or 1).
absl::StatusOr<Tensor> CriteoLabelTensor(const CriteoBatch& batch);

}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_CRITEO_FEED_H_

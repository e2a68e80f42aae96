// Keras Dropout in training: inverted dropout whose mask comes from a
// counter-based random stream, so it is reproducible and needs no generator
// state.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<DropoutOp> dropout,
//                            DropoutOp::Create(batch * 128, /*rate=*/0.5f));
//   DropoutKey key;
//   key.seed = layer_seed;          // e.g. run seed mixed with layer index
//   key.step = global_step;
//   key.offset = first_example * 128;  // see below
//   PSTRAIN_RETURN_IF_ERROR(dropout->Forward(x, key, y));
//   ...
//   PSTRAIN_RETURN_IF_ERROR(dropout->Backward(dy, dx));
//
// Element i of a call keeps its value with probability 1 - rate and is then
// scaled by 1 / (1 - rate); the rest become 0 (as tf.nn.dropout: keep iff
// u >= rate). Its uniform draw u is word (e mod 4) of
// Philox4x32(counter = {lo32(e / 4), hi32(e / 4), lo32(step), hi32(step)},
//        key = {lo32(seed), hi32(seed)}) / 2^32, where e = offset + i.
// So the mask depends only on (seed, step, offset + i): the same key gives
// the same mask on any machine, a new step a fresh one. With offset set to
// the global index of the batch's first element, an example gets the same
// mask however the global batch is split among workers; layers should use
// different seeds.
//
// In inference Keras's Dropout is the identity: do not call Forward then.
// Backward applies the mask of the last Forward. Not thread-safe.
#ifndef PSTRAIN_COMPUTE_CPU_DROPOUT_H_
#define PSTRAIN_COMPUTE_CPU_DROPOUT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/dropout_base.h"

namespace pstrain {
namespace worker {
namespace cpu {

// The key type is DropoutKey (compute/dropout_base.h), named here too.
using ::pstrain::worker::DropoutKey;

// The public methods, their checks and their contract are DropoutBase's
// (compute/dropout_base.h); this draws the mask on the host.
class DropoutOp : public DropoutBase {
 public:
  // INVALID_ARGUMENT unless num_elements > 0 and 0 <= rate < 1.
  static absl::StatusOr<std::unique_ptr<DropoutOp>> Create(int64_t num_elements,
                                                           float rate);

  // The last Forward's mask: 1 kept, 0 dropped (for tests).
  const std::vector<uint8_t>& mask() const { return mask_; }

 private:
  DropoutOp(int64_t num_elements, float rate);

  absl::Status RunForward(const float* x, const DropoutKey& key,
                          float* y) override;
  absl::Status RunBackward(const float* dy, float* dx) override;

  std::vector<uint8_t> mask_;
};

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_DROPOUT_H_

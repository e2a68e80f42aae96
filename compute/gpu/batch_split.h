// Splitting a worker's batch across the GPUs of its machine: contiguous,
// as-even-as-possible slices (the first batch % parts slices get one more
// example), in GPU order.
//
//   PSTRAIN_ASSIGN_OR_RETURN(std::vector<BatchSlice> slices,
//                            SplitBatch(/*batch=*/100, /*parts=*/3));
//   // {0, 34}, {34, 33}, {67, 33}
//
// A slice's offset, added to the batch's example_offset, is the
// example_offset of that GPU's part: dropout masks (keyed by global example
// index) then do not depend on the number of GPUs. The parts' gradients are
// sums over their examples, so all-reducing them (nccl_all_reduce.h) gives
// the batch's gradient. With batch < parts the last slices are empty; skip
// their compute but still join the all-reduce with zero gradients.
#ifndef PSTRAIN_COMPUTE_GPU_BATCH_SPLIT_H_
#define PSTRAIN_COMPUTE_GPU_BATCH_SPLIT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {
namespace worker {
namespace gpu {

struct BatchSlice {
  int64_t offset = 0;  // Index of the slice's first example in the batch.
  int64_t size = 0;    // Number of examples (may be 0).
};

// INVALID_ARGUMENT for batch < 0 or parts <= 0.
absl::StatusOr<std::vector<BatchSlice>> SplitBatch(int64_t batch, int parts);

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_BATCH_SPLIT_H_

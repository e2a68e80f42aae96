// Keras Embedding forward and backward on the GPU (pstrain kernels): the
// twin of compute/cpu/embedding.h, with the same shapes and contracts, on
// device pointers.
//
//   EmbeddingShape shape;
//   shape.ids = batch * sequence_length;
//   shape.input_dim = 10000; shape.output_dim = 16;
//   PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingOp> op,
//                            EmbeddingOp::Create(shape, device));
//   PSTRAIN_RETURN_IF_ERROR(CheckEmbeddingIds(shape, host_ids));
//   ... copy the ids to the device ...
//   PSTRAIN_RETURN_IF_ERROR(op->Forward(ids, table, y));
//   PSTRAIN_RETURN_IF_ERROR(op->Backward(ids, dy, dtable));
//
// The kernels do not check ids: an id outside the table would read or write
// outside it. Ids come from data files, so check them on the host with
// CheckEmbeddingIds before they reach the device. Backward zeroes the whole
// dtable, then adds every id's row of dy with atomic adds: a repeated id's
// rows are summed in no fixed order (float sums may differ in the last bits
// between runs). Work is enqueued on the device's stream. Not thread-safe;
// see Device.
#ifndef PSTRAIN_COMPUTE_GPU_EMBEDDING_H_
#define PSTRAIN_COMPUTE_GPU_EMBEDDING_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compute/cpu/op_shapes.h"
#include "compute/gpu/device.h"

namespace pstrain {
namespace worker {
namespace gpu {

using ::pstrain::worker::cpu::EmbeddingShape;

// INVALID_ARGUMENT naming the first id (and its position) outside
// [0, shape.input_dim) among shape.ids host ids.
absl::Status CheckEmbeddingIds(const EmbeddingShape& shape,
                               const int32_t* ids);

class EmbeddingOp {
 public:
  // INVALID_ARGUMENT for a non-positive size or a null device.
  static absl::StatusOr<std::unique_ptr<EmbeddingOp>> Create(
      const EmbeddingShape& shape, Device* device);

  EmbeddingOp(const EmbeddingOp&) = delete;
  EmbeddingOp& operator=(const EmbeddingOp&) = delete;

  const EmbeddingShape& shape() const { return shape_; }

  // y [ids, output_dim]: row i is table[ids[i]].
  absl::Status Forward(const int32_t* ids, const float* table, float* y);

  // dtable [input_dim, output_dim] = 0, then dtable[ids[i]] += dy[i].
  absl::Status Backward(const int32_t* ids, const float* dy, float* dtable);

 private:
  EmbeddingOp(const EmbeddingShape& shape, Device* device)
      : shape_(shape), device_(device) {}

  const EmbeddingShape shape_;
  Device* const device_;
};

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_GPU_EMBEDDING_H_

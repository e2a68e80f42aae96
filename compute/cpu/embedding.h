// Keras Embedding forward and backward: rows of a table [input_dim,
// output_dim] gathered by int32 id, and their gradient scattered back.
//
//   EmbeddingShape shape;
//   shape.ids = batch * sequence_length;
//   shape.input_dim = 10000; shape.output_dim = 16;
//   PSTRAIN_RETURN_IF_ERROR(EmbeddingForward(shape, ids, table, y));
//   ...
//   PSTRAIN_RETURN_IF_ERROR(EmbeddingBackward(shape, ids, dy, dtable));
//
// y is [ids, output_dim]: row i is table[ids[i]], which for ids of shape
// [batch, T] is Keras's [batch, T, output_dim]. The gradient is dense and
// full-size (every row of dtable written; rows no id names are zero), so it
// follows the same convention as every other variable's gradient; an id
// repeated in the batch accumulates. Ids come from data files: one outside
// [0, input_dim) is INVALID_ARGUMENT naming its position, and nothing is
// written. Plain loops: the op moves memory and does no arithmetic worth a
// library call. Stateless, so thread-compatible.
#ifndef PSTRAIN_COMPUTE_CPU_EMBEDDING_H_
#define PSTRAIN_COMPUTE_CPU_EMBEDDING_H_

#include <cstdint>

#include "absl/status/status.h"
#include "compute/cpu/op_shapes.h"

namespace pstrain {
namespace worker {
namespace cpu {

// y[i, :] = table[ids[i], :].
absl::Status EmbeddingForward(const EmbeddingShape& shape, const int32_t* ids,
                              const float* table, float* y);

// dtable = 0, then dtable[ids[i], :] += dy[i, :] for every i.
absl::Status EmbeddingBackward(const EmbeddingShape& shape, const int32_t* ids,
                               const float* dy, float* dtable);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_EMBEDDING_H_

// The Trainer's buffers (trainer.h: Trainer::Buffers and the batches of
// absent workers it trains), shared by trainer.cc and trainer_covered.cc.
// Private to the trainer library.
#ifndef PSTRAIN_WORKER_TRAINER_BUFFERS_H_
#define PSTRAIN_WORKER_TRAINER_BUFFERS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chief/membership.h"
#include "common/tensor.h"
#include "compute/backend.h"
#include "data/batch_source.h"
#include "worker/trainer.h"

namespace pstrain {
namespace worker {

struct Trainer::CoveredBatch {
  chief::BatchRef ref;
  std::vector<int64_t> indices;
  Tensor features;  // FeedDtype [batch, row elements]
  std::vector<int32_t> labels;
  Tensor wide_ids;  // Streamed Criteo data: as data::Batch's; else empty.
};

// Streamed data: an absent worker's share, read from the step it is at.
struct CoveredStream {
  std::unique_ptr<data::BatchSource> source;
  int64_t next_step = 0;
};

struct Trainer::Buffers {
  std::vector<Tensor> storage;
  Weights weights;
  Gradients gradients;
  // What is pulled and pushed whole: the dense variables.
  std::map<std::string, Tensor*> pull;
  std::map<std::string, Tensor*> push;
  // Worker-local mirrors of the embedding tables, by name.
  std::map<std::string, Tensor*> mirrors;
  // For the batches of absent workers: their gradients (and, of those, the
  // dense variables', pushed whole) and examples.
  std::vector<Tensor> covered_storage;
  Gradients covered_gradients;
  std::map<std::string, Tensor*> covered_push;
  std::vector<CoveredBatch> covered;
  // Streamed data: each covered worker's stream, by worker.
  std::map<int, CoveredStream> covered_streams;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_TRAINER_BUFFERS_H_

// Named random streams of one training run, after Paddle's RNG state tracker
// (paddle.distributed.fleet.meta_parallel.get_rng_state_tracker): every seed
// a replica uses is derived from the one run seed, in one of two kinds.
//
//   GLOBAL  the same seed on every replica (worker, GPU) of a parameter, for
//           randomness that must agree everywhere: Paddle's "global dropout",
//           whose input is identical on all model-parallel ranks.
//   LOCAL   a seed distinct per replica (derived from the run seed and the
//           replica index), for randomness that must differ: Paddle's "local
//           dropout" on each rank's slice of a split activation.
//
//   RngTracker rng(run_seed, /*replica=*/task_index);
//   DropoutKey key;
//   key.seed = rng.GlobalSeed("dropout");  // the Dropout layer's name
//   key.step = step;
//   key.offset = DropoutElementOffset(example_offset, features_per_example);
//
// Dropout in pstrain's data-parallel training uses the GLOBAL stream of the
// layer (seed GlobalSeed(layer name)), with Philox's element counter
//   offset = (example_offset + row) * features_per_example + element
// where example_offset is the index of the batch's first example within the
// step's global batch (StepInput::example_offset) and row, element index the
// activation [batch, features_per_example] within this batch. An element's
// mask bit is then a function of (run seed, layer, step, global example,
// element) only, so a step's masks are identical however the global batch is
// split across workers: N workers compute exactly what one process with the
// global batch computes. A LOCAL stream would break that (each replica would
// draw different masks for the same example), so it is kept for randomness
// that is meant to be per replica.
//
// Seeds are fixed-width arithmetic (common/derived_seed.h), so they are the
// same on every machine and build. Immutable: safe for concurrent use.
#ifndef PSTRAIN_COMPUTE_RNG_TRACKER_H_
#define PSTRAIN_COMPUTE_RNG_TRACKER_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace pstrain {
namespace worker {

class RngTracker {
 public:
  // `replica` is this replica's index (e.g. the worker's task index); only
  // local streams depend on it.
  RngTracker(uint64_t run_seed, int replica)
      : run_seed_(run_seed), replica_(replica) {}

  uint64_t run_seed() const { return run_seed_; }
  int replica() const { return replica_; }

  // The seed of the global stream `name`: the same on every replica,
  //   DeriveSeed(run_seed, "rng/global/" + name).
  uint64_t GlobalSeed(absl::string_view name) const;

  // The seed of the local stream `name` on this replica,
  //   DeriveSeed(run_seed, "rng/local/<replica>/" + name),
  // distinct per replica and per name (barring 64-bit hash collisions).
  uint64_t LocalSeed(absl::string_view name) const;

 private:
  uint64_t run_seed_;
  int replica_;
};

// The Philox element offset of a batch's first element for a dropout over
// activations of `features_per_example` elements per example:
// example_offset * features_per_example. Element `element` of row `row`
// then sits at offset + row * features_per_example + element, which is
// (example_offset + row) * features_per_example + element.
inline uint64_t DropoutElementOffset(int64_t example_offset,
                                     int64_t features_per_example) {
  return static_cast<uint64_t>(example_offset) *
         static_cast<uint64_t>(features_per_example);
}

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_RNG_TRACKER_H_

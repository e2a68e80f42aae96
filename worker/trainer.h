// A worker's training loop: its share of every step of a run.
//
// Each step: take the next batch of this worker's shard of the data, pull the
// variables from the ps tasks (in sync mode, as of this step), compute the
// gradients with the Backend, push them. Dense variables are pulled and
// pushed whole (a tensor-parallel member's split ones as its part:
// TrainerOptions::parts); an embedding table (a model starting with a Keras
// Embedding) only in the rows the step's ids touch (worker/sparse_tables.h).
// Every few steps it reports loss, accuracy and throughput to the chief; at the
// end it tells the chief it has finished. The model, placement and run settings
// come from the chief (RegisterResponse).
//
// Before computing each step (after pulling its variables) the worker
// heartbeats the chief with the number of steps it has completed; when the
// chief has announced that step as its pause_at_step (to write a checkpoint
// at a consistent step), the worker holds, heartbeating, until the
// announcement changes. The reply also says which workers are absent
// (presumed dead under --on_worker_failure=continue): the worker then
// trains the batches of those it covers too (chief/membership.h), as they
// would have, and pushes the sum. A run resumed from a
// checkpoint starts at TrainerOptions::start_step, with the data where an
// uninterrupted run would have been (same epoch order, same batch).
//
// Failures: calls to a ps that cannot be reached are retried (PsClient);
// a step that still fails because a peer is gone (ps::IsPeerFailure) is
// not the end of the worker. It asks the chief how to go on: the same step
// again (a passing network fault), or, after the chief restored the ps
// tasks from a checkpoint (a new recovery generation), the checkpoint's
// step, with the data of that step. It holds while the chief is recovering
// or restarting, up to chief_patience. A background heartbeat tells the
// chief it is alive while a step waits.
#ifndef PSTRAIN_WORKER_TRAINER_H_
#define PSTRAIN_WORKER_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "chief/chief_client.h"
#include "chief/membership.h"
#include "common/retry.h"
#include "common/thread_pool.h"
#include "compute/backend.h"
#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/prefetcher.h"
#include "data/run_length.h"
#include "data/shard_plan.h"
#include "model/keras_model.h"
#include "ps/ps_client.h"
#include "ps/variable_store.h"
#include "worker/sparse_tables.h"
#include "worker/worker_metrics.h"

namespace pstrain {
namespace worker {

struct TrainerOptions {
  int worker_index = 0;
  int num_workers = 1;
  // Which share of each step's global batch this worker reads, of how many:
  // -1 for its own (worker_index of num_workers). A tensor-parallel group's
  // members read their group's (parallel/mesh.h: data index of D groups).
  int data_shard = -1;
  int data_shards = -1;
  // A tensor-parallel member's parts of the split variables: it holds,
  // pulls and pushes only those (ps::VariableStore::HoldParts), and its
  // backend computes on them.
  std::map<std::string, ps::DensePart> parts;
  // Report metrics to the chief every this many steps, and at each epoch's
  // end (so that no report straddles two epochs).
  int report_every_steps = 20;
  // Steps already done (a resumed checkpoint's step; TrainingState.start_step).
  int64_t start_step = 0;
  // The run's recovery generation (TrainingState.generation).
  int64_t generation = 0;
  // How long to wait for a chief that cannot be reached.
  absl::Duration chief_patience = absl::Minutes(5);
  // Interval of the heartbeat that says the worker is alive.
  absl::Duration liveness_interval = absl::Seconds(1);
  // How often a held worker asks the chief whether it may go on.
  absl::Duration pause_poll = absl::Milliseconds(20);
  // The pauses between a worker's questions to the chief after a peer
  // failed: Backoff(resync_backoff, try), at least pause_poll. Tests
  // shorten them.
  RetryOptions resync_backoff;
  // Sleep this long before each push: a straggler on purpose, to see backup
  // workers at work (tests, demonstrations).
  absl::Duration push_delay = absl::ZeroDuration();
  // The run's placement (RegisterResponse.placement): where the rows of
  // embedding tables live. Needed only by a model with one.
  Placement placement;
  // Where steps are counted and timed (null: nowhere); must outlive the
  // Trainer.
  WorkerMetrics* metrics = nullptr;
  // Training data streamed rather than held (--data_format=criteo): opens
  // the batches of worker `worker`'s share (this worker's, or an absent
  // one's it covers) from `first_step` on (data/criteo_batch_source.h).
  // When set, the Trainer's `train` may be null and stream_examples is the
  // number of examples of an epoch.
  std::function<absl::StatusOr<std::unique_ptr<data::BatchSource>>(
      int64_t first_step, const data::RunLength& length, int worker)>
      open_stream;
  int64_t stream_examples = 0;
  // Where the rows of embedding tables live: the ps tasks. Null in a
  // collective run, whose models have none (collective/local_replica.h).
  ps::PsClusterClient* embedding_ps = nullptr;
  // Collective runs, where the variables live in the worker: writes the
  // checkpoint of `step` (set on worker 0, which writes them for the run;
  // null elsewhere). Called while holding at a step the chief pauses at for
  // a checkpoint, and after the last step, before telling the chief.
  std::function<absl::Status(int64_t step)> save_checkpoint;
  // Collective runs: loads the checkpoint of `step` into the worker's
  // variables (step 0: their initial values), when the run starts at a step
  // after 0 or the chief restores it. A failed step then waits (up to
  // chief_patience) for the chief to restore the run, never retries as it
  // is: the replicas may differ.
  std::function<absl::Status(int64_t step, int64_t generation)> restore;
  // Collective runs: this worker restarted mid-run (TrainingState.
  // restore_pending); it waits for the chief's restore before any step.
  bool restore_pending = false;
  // Collective runs: told, during the backend's TrainStep of `step`, that
  // a variable's gradient is final (StepInput::gradient_ready), so that the
  // replica all-reduces it while the rest of the backward runs.
  std::function<void(int64_t step, const std::string& variable,
                     absl::Span<float> gradient)>
      gradient_ready;
};

class Trainer {
 public:
  // All pointers must outlive the Trainer.
  Trainer(TrainerOptions options, const TrainingConfig* config,
          const ModelSpec* spec, const data::Dataset* train, Backend* backend,
          ps::VariableStore* variables, chief::ChiefClient* chief);

  // Trains until the chief ends the run: a worker that trained every step
  // waits for that, and trains again from the step a chief started again
  // meanwhile goes back to. OK once the chief finished the run; errors name
  // the step and what failed.
  absl::Status Run();

 private:
  // Where training goes on: a step of a recovery generation.
  struct Position {
    int64_t step = 0;
    int64_t generation = 0;
    // The chief finished or failed the run.
    bool over = false;
  };
  // Weights and gradients of every variable, allocated once.
  struct Buffers;
  // One absent worker's batch that this worker trains (chief/membership.h).
  struct CoveredBatch;

  // Trains steps *step.. to the end of the run, advancing *step.
  absl::Status TrainFrom(const data::ShardPlan& plan,
                         const data::RunLength& length, Buffers& buffers,
                         int64_t* step);
  // Heartbeats before computing `step` (after pulling its variables);
  // holds while the run is paused or the chief's pause_at_step is `step`;
  // keeps the membership. ABORTED when the chief recovered the run into
  // another generation (or restarted) or this worker is absent,
  // FAILED_PRECONDITION when it failed the run.
  absl::Status WaitUntilMayStart(int64_t step);
  // Gathers into `buffers.covered` the batches of absent workers this
  // worker trains at `step` (chief/membership.h), as they would have.
  // Sizes the covered batches' gradients on first use.
  absl::Status EnsureCoveredGradients(Buffers& buffers);
  // Streamed data: reads each of `covered` from its worker's stream.
  absl::Status ReadCoveredBatches(const std::vector<chief::BatchRef>& covered,
                                  const data::RunLength& length,
                                  Buffers& buffers);
  absl::Status GatherCoveredBatches(int64_t step, const data::RunLength& length,
                                    Buffers& buffers);
  // Starts the step's tables (SparseTables::Clear) and pulls the embedding
  // rows `batch` touches; with a null `batch`, adds the ids of
  // buffers.covered to the step's and pulls every row again. The first runs
  // on beside_ while the dense variables are pulled.
  absl::Status PullSparse(int64_t step, data::Batch* batch, Buffers& buffers);
  // Trains the gathered covered batches, adding their losses and examples
  // to `*result`. In sync mode a batch owed from an earlier step (its
  // worker's last push may have reached some ps tasks) is pushed at once,
  // on its own, as owed (RequestHeader.owed): each ps adds it unless it
  // holds it already. The others' gradients are added to
  // `buffers.gradients`, pushed with this worker's own. Returns the
  // examples of those others.
  absl::StatusOr<int64_t> TrainCoveredBatches(int64_t step, Buffers& buffers,
                                              StepResult* result);
  // Whether a covered batch of `batch_step` is pushed on its own at `step`,
  // as owed.
  bool IsOwed(int64_t batch_step, int64_t step) const;
  // After a peer failure at `at`, or once `done` (this worker trained
  // every step and said so): where to go on, per the chief (registering
  // again if the chief restarted). A worker that is done waits for the run
  // to end (over), or for a restore to an earlier step (a new generation).
  absl::StatusOr<Position> Resync(const Position& at,
                                  const data::RunLength& length, bool done);
  // Collective runs: loads the variables of `at` (options_.restore). A
  // peer failure (the generation's all-reduce could not be joined: a peer
  // is gone or late) does not end the worker: it sets *wait, and the worker
  // asks the chief again and waits for its next generation, as after a
  // failed all-reduce. Other errors are returned.
  absl::Status Restore(const Position& at, bool* wait);
  // The run's last step is trained: writes the final checkpoint (collective
  // runs) and tells the chief; returns the run's phase, as the chief says.
  absl::StatusOr<RunPhase> Finish(const data::RunLength& length);
  void SetGeneration(int64_t generation);

  // `status` of what failed at `step`, with both in its message.
  static absl::Status AtStep(int64_t step, absl::string_view what,
                             const absl::Status& status);
  // A failed call to the chief: NOT_FOUND (a restarted chief that does not
  // know this worker yet) becomes ABORTED, a peer failure like the others.
  static absl::Status ChiefFailure(const absl::Status& status);
  // The chief failed the run (FAILED_PRECONDITION).
  static absl::Status RunFailed(int64_t step);

  const TrainerOptions options_;
  const TrainingConfig* const config_;
  const ModelSpec* const spec_;
  const data::Dataset* const train_;
  Backend* const backend_;
  ps::VariableStore* const ps_;
  chief::ChiefClient* const chief_;
  // The phase the liveness heartbeats last heard: the chief may stop
  // answering once one of them told it the run is over.
  std::atomic<RunPhase> heard_phase_{PHASE_UNSPECIFIED};
  int64_t generation_ = 0;
  Membership membership_;
  // The model's embedding tables; empty for a model without any.
  std::unique_ptr<SparseTables> sparse_;
  // Steps computed on mirrors of the tables: their weights_version, which
  // never repeats within the run (not even after a resync).
  uint64_t mirror_versions_ = 0;
  // Data plans of the other workers, for the batches of absent ones.
  std::map<int, data::ShardPlan> plans_;
  // Pulls and pushes the tables' rows while this thread pulls and pushes
  // the dense variables (they share the PsClients: ps/ps_client.h).
  ThreadPool beside_{1};
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_TRAINER_H_

// A ps task's shard: the variable pieces the run's placement gives this task,
// the optimizer, and the update mode (sync or async). The core of the `ps`
// binary; it knows nothing of gRPC (ps/ps_service.h adapts it).
//
// Every request is checked before any state changes: the run id, then every
// gradient (known variable, dtype, shape, slice, chunk coverage, version,
// finiteness). A refused request leaves every variable as it was.
//
//   Shard shard(ShardOptions{.ps_task = 0});
//   PSTRAIN_RETURN_IF_ERROR(shard.CreateVariables(create_request, &created));
//   PSTRAIN_ASSIGN_OR_RETURN(PushDenseResponse r, shard.PushDense(messages));
//
// Thread-safe: any number of requests may run concurrently.
//
// shard.cc defines creation, pulls and membership; shard_push.cc the pushes;
// shard_checkpoint.cc Save and Restore.
#ifndef PSTRAIN_PS_SHARD_H_
#define PSTRAIN_PS_SHARD_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/update_config.h"
#include "proto/ps_service.pb.h"
#include "ps/dense_part.h"
#include "ps/dense_variable.h"
#include "ps/dense_view.h"
#include "ps/embedding_table.h"
#include "ps/optimizer.h"
#include "ps/push_record.h"

namespace pstrain {
namespace ps {

struct ShardOptions {
  // This task's index in the TF_CONFIG "ps" job.
  int ps_task = 0;
  // How long a sync pull waits for its step when the run sets no timeout.
  absl::Duration default_step_timeout = kDefaultStepTimeout;
  // Overrides the run's NanPolicy when set (the ps's --nan_policy flag).
  std::optional<NanPolicy> nan_policy;
  // Called (once per offending push) when a non-finite gradient arrives under
  // NAN_ABORT; main() logs it and exits.
  std::function<void(const absl::Status&)> on_abort;
  // The directory checkpoints live in (the ps's --model_dir). Save and
  // Restore name a checkpoint directory inside it, never a path: requests
  // cannot reach any other file. Empty: Save and Restore are refused.
  std::string checkpoint_root;
  // The most bytes (values and optimizer slots) CreateVariables may place on
  // this shard; a larger request is RESOURCE_EXHAUSTED before anything is
  // allocated.
  int64_t max_bytes = int64_t{1} << 40;
  // Count how many times each global batch (RequestHeader.batches) is
  // applied by a dense push (ShardStatus.batches_applied, BatchesApplied):
  // for tests that check that no batch is lost or counted twice.
  bool count_batches = false;
};

class Shard {
 public:
  explicit Shard(ShardOptions options);
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Creates this shard's pieces (the slices placed on options.ps_task) and
  // takes the request's run id as the shard's. Repeating the same request is
  // a no-op; another definition is ALREADY_EXISTS, another run id
  // FAILED_PRECONDITION.
  absl::Status CreateVariables(const CreateVariablesRequest& request,
                               CreateVariablesResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Calls `emit` once per requested dense variable (all of them when
  // request.names is empty), in name order, with its value as of a version
  // >= request.min_version, under the variable's shared lock: `emit` must
  // not block, and must copy the bytes unless it keeps value.owner
  // (DenseVariable::Read). Sync pulls wait for their step up to the step
  // timeout (then DEADLINE_EXCEEDED naming the variable and the missing
  // gradients). For a variable of request.parts, `part` is set and the
  // value is the part's rows on this piece (ps/dense_part.h), else `part`
  // is null and the value the piece. A malformed part, or one of a
  // variable not pulled, is INVALID_ARGUMENT naming the variable.
  using PullEmit =
      std::function<void(const DenseVariable& variable, const DensePart* part,
                         const ValueView& value)>;
  absl::Status PullDense(const PullDenseRequest& request, const PullEmit& emit)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The same, for a caller that needs no part (tests).
  absl::Status PullDense(
      const PullDenseRequest& request,
      const std::function<void(const DenseVariable& variable,
                               const ValueView& value)>& emit)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Applies one worker's push: the messages of one PushDense stream, whose
  // first message carries the header, version and batch size. The gradients
  // are sums over the worker's batch, in chunks covering each pushed
  // variable's piece exactly once (or, for a variable of the first
  // message's parts, the part's rows on the piece: sync mode only).
  absl::StatusOr<PushDenseResponse> PushDense(
      absl::Span<const PushDenseView* const> messages)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The same, from parsed messages.
  absl::StatusOr<PushDenseResponse> PushDense(
      absl::Span<const PushDenseRequest* const> messages)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Rows of an embedding table by id: a row for each of the request's ids,
  // in order, after the table reached request.min_version (sync).
  absl::Status PullSparse(const PullSparseRequest& request,
                          PullSparseResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether PullSparse of table `name` after `min_version` would answer
  // without waiting for a step: the table is there and reached it. (False
  // when it is not: the pull's own checks answer then.)
  bool SparseReady(const std::string& name, int64_t min_version) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Row gradients of an embedding table; rows of duplicate ids are summed,
  // and only the touched rows are updated. Checked like PushDense, and as
  // idempotent (see Restore): sync, a worker counts once per step and
  // table; async, a worker's push of a step to a table (or a retry) is
  // answered with the recorded response instead of being applied again.
  absl::Status PushSparse(const PushSparseRequest& request,
                          PushSparseResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Writes every piece's arrays (value and optimizer slots) into
  // "<checkpoint_root>/<directory>/ps-<task>.data", atomically, and lists
  // the slices written. request.directory must be one plain name (see
  // CheckpointDirectory).
  // In sync mode every variable must be at request.step (the chief saves at
  // a step boundary), else FAILED_PRECONDITION naming the variable.
  absl::Status Save(const SaveRequest& request, SaveResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces this shard's state with the parts of request.slices (files of
  // "<checkpoint_root>/<directory>") that its pieces hold (the checkpoint may
  // have been written by another number of ps tasks). Every byte read is
  // checked against its slice's length and CRC32C, and every row of every piece
  // must be found, before anything changes: a damaged or incomplete checkpoint
  // is DATA_LOSS or FAILED_PRECONDITION naming the file or variable, and leaves
  // the shard as it was. Once restored, the shard serves request.generation:
  // pulls waiting for a step are woken with ABORTED, and pushes and pulls of
  // another generation are refused with ABORTED.
  //
  // Pushes are idempotent: in sync mode a worker's gradient counts once per
  // step however often it is pushed; in async mode a worker's push of a
  // step (RequestHeader.step), or a retried push (same request id), is
  // answered without being applied again.
  absl::Status Restore(const RestoreRequest& request,
                       RestoreResponse* response) ABSL_LOCKS_EXCLUDED(mu_);

  // The shard's counters, and its run's state when the request is of its
  // run (FAILED_PRECONDITION for another run). Before CreateVariables: the
  // counters, run_id "".
  absl::Status GetShardStatus(const GetShardStatusRequest& request,
                              ShardStatus* status) ABSL_LOCKS_EXCLUDED(mu_);

  // Wakes every pull waiting for a step (they fail with ABORTED), so that a
  // server shutting down does not wait for them.
  void InterruptPulls(const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);

  // Sync: the number of gradients a step waits for and the absent workers
  // (presumed dead; their pushes are refused with ABORTED) become the
  // request's; a pending step that already has enough is applied at once.
  absl::Status SetWorkers(const SetWorkersRequest& request,
                          SetWorkersResponse* response) ABSL_LOCKS_EXCLUDED(mu_);

  int ps_task() const { return options_.ps_task; }
  // The run's id ("" before CreateVariables).
  std::string run_id() const ABSL_LOCKS_EXCLUDED(mu_);
  // Rows each embedding table holds, by name (empty before CreateVariables).
  std::map<std::string, int64_t> EmbeddingRows() const ABSL_LOCKS_EXCLUDED(mu_);
  // With count_batches: how many times each global batch was applied.
  std::map<int64_t, int> BatchesApplied() const ABSL_LOCKS_EXCLUDED(ledger_mu_);
  // Bytes of the dense pieces' values (0 before CreateVariables): the most
  // gradient content one dense push carries.
  int64_t DenseBytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The run's immutable state once CreateVariables succeeded.
  struct Run {
    std::string run_id;
    CreateVariablesRequest definition;  // header cleared
    std::unique_ptr<Optimizer> optimizer;
    // The optimizers of embedding tables with one of their own
    // (VariableDef.optimizer).
    std::vector<std::unique_ptr<Optimizer>> table_optimizers;
    // What each VariableDef.moving_average variable applies instead.
    std::vector<std::unique_ptr<Optimizer>> moving_averages;
    UpdateConfig update;
    // Sync: gradients a step waits for, and the workers whose pushes are
    // refused; SetWorkers changes them.
    mutable std::atomic<int> replicas_to_aggregate{1};
    mutable absl::Mutex workers_mu;
    mutable std::vector<int> absent_workers ABSL_GUARDED_BY(workers_mu);
    NanPolicy nan_policy = NAN_REJECT;
    absl::Duration step_timeout;
    std::map<std::string, std::unique_ptr<DenseVariable>> dense;
    int64_t dense_bytes = 0;  // of the dense pieces' values
    std::map<std::string, std::unique_ptr<EmbeddingTable>> tables;
  };

  // The parts a request names, by variable, each checked (CheckPart):
  // INVALID_ARGUMENT naming the variable for a malformed one, one of an
  // embedding table or of a variable this task does not hold, or two parts
  // of one variable.
  absl::StatusOr<std::map<std::string, DensePart>> CheckParts(
      const Run& run,
      const google::protobuf::RepeatedPtrField<VariablePart>& parts) const;

  // The embedding table `name` of `run`: INVALID_ARGUMENT if this task
  // holds none of that name.
  absl::StatusOr<EmbeddingTable*> FindTable(const Run& run,
                                            const std::string& name) const;

  // The run, if the header's run id is its own; FAILED_PRECONDITION else.
  absl::StatusOr<const Run*> CheckRun(const RequestHeader& header) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // OK if a push or pull of `header`'s generation may be served: ABORTED
  // naming both generations if the shard was restored into another one.
  absl::Status CheckGeneration(const RequestHeader& header) const;

  // OK unless `worker` is one SetWorkers named absent (ABORTED).
  absl::Status CheckPresent(const Run& run, int worker) const;

  // "<checkpoint_root>/<name>" for a checkpoint directory a request names:
  // INVALID_ARGUMENT unless `name` is one plain name (letters, digits, '.',
  // '_', '-', not starting with '.'), FAILED_PRECONDITION without a root.
  absl::StatusOr<std::string> CheckpointDirectory(
      const std::string& name) const;

  // The checks every push passes before its tensors are read: the
  // generation, the sender's presence, an owed push's form, a positive
  // batch size and a non-negative version. Returns the sending worker (-1:
  // not a worker).
  absl::StatusOr<int> CheckPusher(const Run& run, const RequestHeader& header,
                                  int64_t batch_size, int64_t version) const
      ABSL_SHARED_LOCKS_REQUIRED(apply_mu_);

  // Counts a refused push and returns `status`.
  absl::Status Refuse(absl::Status status);

  // OK if a push computed from `version` may update a variable now at
  // `current`: not from the future, and (async) within max_staleness.
  absl::Status CheckPushVersion(const Run& run, const std::string& name,
                                int64_t version, int64_t current);

  // The policy's verdict on a gradient chunk: OK (finite, or skip the step:
  // *skip set), or the refusal naming `name` and the element.
  absl::Status CheckFinite(const Run& run, const std::string& name,
                           const Chunk& chunk, bool* skip);

  const ShardOptions options_;

  mutable absl::Mutex mu_;
  // Set once by CreateVariables, then only read.
  std::unique_ptr<Run> run_ ABSL_GUARDED_BY(mu_);

  // The recovery generation served (RestoreRequest.generation).
  std::atomic<int64_t> generation_{0};
  // Held shared by a push from its generation check until it is applied,
  // and exclusively by Restore, so that no push of an older generation
  // lands after a restore.
  absl::Mutex apply_mu_ ABSL_ACQUIRED_BEFORE(mu_);

  // Async pushes lately applied, by sending worker (and table, for sparse
  // ones), under their key (PushKey: the worker's step, or the request
  // id): a push of the same step, or a retry, is answered from here
  // instead of being applied again. Cleared by Restore, after which steps
  // are trained, and pushed, again.
  PushRecord<int, PushDenseResponse> recent_dense_;
  PushRecord<std::pair<int, std::string>, PushSparseResponse> recent_sparse_;

  // Adds one to the count of each of `header`'s batches (count_batches).
  void CountBatches(const RequestHeader& header)
      ABSL_LOCKS_EXCLUDED(ledger_mu_);

  // With count_batches: applications of each global batch.
  mutable absl::Mutex ledger_mu_ ABSL_ACQUIRED_AFTER(apply_mu_);
  std::map<int64_t, int> batches_applied_ ABSL_GUARDED_BY(ledger_mu_);

  std::atomic<int64_t> pushes_applied_{0};
  std::atomic<int64_t> pushes_dropped_stale_{0};
  std::atomic<int64_t> pushes_refused_{0};
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_SHARD_H_

// A worker's own copy of every variable of a collective run
// (MultiWorkerMirroredStrategy; issue 17): where the variables live when
// the cluster has no ps. Each worker holds one, created from the run's seed
// with the initializers and optimizer the ps tasks use (ps/dense_variable.h,
// ps/initializer.h, ps/optimizer.h), so every replica starts equal. Each
// step, PushDense all-reduces the workers' gradient sums and example counts
// around the ring (collective/ring_allreduce.h; every participant ends with
// the same sum, bit for bit), divides the sum by the global batch and
// applies the optimizer, exactly as a sync ps applies a step: the replicas
// stay bit-identical, and equal to a ps run's variables up to the order in
// which the sum was added.
//
//   LocalReplicaOptions options;
//   options.variables = spec.variables;
//   options.optimizer = config.optimizer();
//   options.ring = participant->ring();
//   PSTRAIN_ASSIGN_OR_RETURN(auto replica, LocalReplica::Create(options));
//   worker::Trainer trainer(..., replica.get(), ...);
//
// The all-reduce overlaps the backward pass: the variables are split into
// buckets (collective/ring_allreduce.h's bucketed AllReduce, one ring pass
// each) in reverse model order, the last layers' first, each at least
// bucket_bytes of gradient (at most kMaxBucketsPerStep buckets), so a step
// makes few calls. GradientReady, called by the backend as each variable's
// gradient is final (StepInput::gradient_ready), hands a bucket to the
// replica's reducer thread as soon as its variables and every bucket before
// it are final; the reducer all-reduces it while the backend computes the
// earlier layers' gradients. PushDense hands over what was not reported
// (everything, for a backend that never reports), waits for the reducer and
// applies the step. The buckets are the same on every worker (they depend
// on the variables alone) and are reduced in the same order, so the
// replicas stay bit-identical whatever order or time the gradients become
// final in, and a worker whose backend reports nothing runs with one that
// does.
//
// Embedding tables (sparse variables) are not held: Create refuses them.
// Thread-safety: one thread (the step loop) calls everything but
// GradientReady, which the backend calls from the thread computing the
// step; Save and Restore (collective/replica_checkpoint.h) between steps.
#ifndef PSTRAIN_COLLECTIVE_LOCAL_REPLICA_H_
#define PSTRAIN_COLLECTIVE_LOCAL_REPLICA_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "collective/all_reducer.h"
#include "common/tensor.h"
#include "proto/training.pb.h"
#include "ps/dense_variable.h"
#include "ps/optimizer.h"
#include "ps/variable_store.h"

namespace pstrain {
namespace worker {

struct LocalReplicaOptions {
  // The run's variables (dense, float32).
  std::vector<VariableDef> variables;
  OptimizerConfig optimizer;
  // The all-reduce among the run's workers (the gRPC ring, or NCCL on GPU
  // workers), which must outlive the replica; null for a run of one worker.
  collective::AllReducer* ring = nullptr;
  // Workers in the ring, >= 1. Every worker's batch of a step is the same
  // size (the data plan drops the remainder of an epoch), so the global
  // batch is num_workers times this worker's.
  int num_workers = 1;
  // A bucket closes once it holds this many bytes of gradient, > 0.
  int64_t bucket_bytes = 256 << 10;
};

class LocalReplica : public ps::VariableStore {
 public:
  // INVALID_ARGUMENT for a bad optimizer or initializer; UNIMPLEMENTED
  // naming an embedding table (a sparse variable).
  static absl::StatusOr<std::unique_ptr<LocalReplica>> Create(
      LocalReplicaOptions options);
  // Waits for the reducer's all-reduce, if one runs, and stops it.
  ~LocalReplica() override;

  // Most buckets a step is split into (all-reduce ids hold the step and
  // the bucket).
  static constexpr int kMaxBucketsPerStep = 16;

  // The gradient of variable `name` for step `step` is final in `gradient`,
  // which must be the buffer PushDense will get for it and stay unchanged
  // until PushDense returns: its bucket may go out now. A name the replica
  // does not hold, a size that differs, or a buffer PushDense is not given
  // fails that PushDense. A step other than the one under way starts a new
  // one (after the reducer is done with the old).
  void GradientReady(int64_t step, const std::string& name,
                     absl::Span<float> gradient) ABSL_LOCKS_EXCLUDED(mu_);

  // The buckets: indices into the options' variables, in the order they
  // are all-reduced.
  const std::vector<std::vector<int>>& buckets() const { return buckets_; }

  // All-reduces `gradients` (every variable's; those GradientReady did
  // not report are handed to the reducer now) across the workers, bucket by
  // bucket, then applies sum / (num_workers * batch_size) to every
  // variable. All-reduce ids come from the generation, the step (set_step)
  // and the bucket, so that a step trained again after a restore is a new
  // all-reduce. Ring errors (DEADLINE_EXCEEDED, UNAVAILABLE) are returned as
  // they are; the variables are then unchanged.
  absl::Status PushDense(int64_t version, int64_t batch_size,
                         const std::map<std::string, Tensor*>& gradients)
      override ABSL_LOCKS_EXCLUDED(mu_);

  // Copies the variables' values into `values`; returns their version (the
  // steps applied). FAILED_PRECONDITION if that is below min_version, or
  // for a name the replica does not hold.
  absl::StatusOr<int64_t> PullDense(
      int64_t min_version,
      const std::map<std::string, Tensor*>& values) override;

  void set_generation(int64_t generation) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    generation_ = generation;
  }
  void set_step(int64_t step, const std::vector<int64_t>& batches,
                bool owed = false) override {
    step_ = step;
  }

  // The variables, in name order.
  const std::map<std::string, std::unique_ptr<ps::DenseVariable>>& variables()
      const {
    return variables_;
  }
  // The steps applied (every variable's version).
  int64_t version() const;

  // Back to the start: every variable as Create made it (a collective run
  // restored at step 0, which has no checkpoint).
  absl::Status Reinitialize();

 private:
  LocalReplica() = default;

  // Starts step `step` of the current generation: waits until the reducer
  // is idle, then forgets the last step's state.
  void BeginStep(int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records variable `index`'s gradient; queues the buckets it completes.
  void MarkReady(int index, absl::Span<float> gradient)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The reducer thread's body.
  void ReduceLoop() ABSL_LOCKS_EXCLUDED(mu_);

  collective::AllReducer* ring_ = nullptr;
  // The options' variables' sizes in their order, each one's index there
  // and bucket, and each bucket's variables.
  std::vector<int64_t> bytes_of_;
  std::map<std::string, int> index_of_;
  std::vector<int> bucket_of_;
  std::vector<std::vector<int>> buckets_;
  std::unique_ptr<ps::Optimizer> optimizer_;
  // BatchNormalization's moving statistics (VariableDef.moving_average).
  std::vector<std::unique_ptr<ps::Optimizer>> moving_averages_;
  std::map<std::string, std::unique_ptr<ps::DenseVariable>> variables_;
  // Each variable's optimizer (optimizer_ or its moving average).
  std::map<std::string, const ps::Optimizer*> optimizers_;
  int64_t step_ = 0;
  int num_workers_ = 1;

  absl::Mutex mu_;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // The step under way (-1: none) and its generation; per variable, its
  // final gradient (empty: not yet); per bucket, its variables not yet
  // final; the buckets handed to the reducer and those it finished; the
  // step's first error.
  int64_t step_under_way_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t step_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Span<float>> ready_ ABSL_GUARDED_BY(mu_);
  std::vector<int> missing_ ABSL_GUARDED_BY(mu_);
  int queued_ ABSL_GUARDED_BY(mu_) = 0;
  int reduced_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status step_error_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Runs the all-reduces (only when there is a ring of several).
  std::thread reducer_;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_LOCAL_REPLICA_H_

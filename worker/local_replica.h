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
// Embedding tables (sparse variables) are not held: Create refuses them.
// Not thread-safe: the step loop calls it from one thread; Save and Restore
// (worker/replica_checkpoint.h) between steps.
#ifndef PSTRAIN_WORKER_LOCAL_REPLICA_H_
#define PSTRAIN_WORKER_LOCAL_REPLICA_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collective/ring_allreduce.h"
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
  // The all-reduce among the run's workers, which must outlive the replica;
  // null for a run of one worker.
  collective::RingAllReduce* ring = nullptr;
  // Workers in the ring, >= 1. Every worker's batch of a step is the same
  // size (the data plan drops the remainder of an epoch), so the global
  // batch is num_workers times this worker's.
  int num_workers = 1;
};

class LocalReplica : public ps::VariableStore {
 public:
  // INVALID_ARGUMENT for a bad optimizer or initializer; UNIMPLEMENTED
  // naming an embedding table (a sparse variable).
  static absl::StatusOr<std::unique_ptr<LocalReplica>> Create(
      LocalReplicaOptions options);

  // All-reduces `gradients` (every variable's, in name order, as one flat
  // buffer) across the workers, then applies sum / (num_workers *
  // batch_size) to every variable. All-reduce ids come from the generation and
  // the step (set_step), so that a step trained again after a restore is a
  // new all-reduce. Ring errors (DEADLINE_EXCEEDED, UNAVAILABLE) are
  // returned as they are; the variables are then unchanged.
  absl::Status PushDense(
      int64_t version, int64_t batch_size,
      const std::map<std::string, Tensor*>& gradients) override;

  // Copies the variables' values into `values`; returns their version (the
  // steps applied). FAILED_PRECONDITION if that is below min_version, or
  // for a name the replica does not hold.
  absl::StatusOr<int64_t> PullDense(
      int64_t min_version,
      const std::map<std::string, Tensor*>& values) override;

  void set_generation(int64_t generation) override { generation_ = generation; }
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

  collective::RingAllReduce* ring_ = nullptr;
  std::unique_ptr<ps::Optimizer> optimizer_;
  // BatchNormalization's moving statistics (VariableDef.moving_average).
  std::vector<std::unique_ptr<ps::Optimizer>> moving_averages_;
  std::map<std::string, std::unique_ptr<ps::DenseVariable>> variables_;
  // Each variable's optimizer (optimizer_ or its moving average).
  std::map<std::string, const ps::Optimizer*> optimizers_;
  int64_t generation_ = 0;
  int64_t step_ = 0;
  int num_workers_ = 1;
  // The gradients' flat views, reused every step.
  std::vector<absl::Span<float>> spans_;
};

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_LOCAL_REPLICA_H_

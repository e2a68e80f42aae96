// A worker's part in a model-parallel group (the chief's --mesh with
// model:M > 1): the gRPC ring to the other members of its group, listening
// at the worker's own TF_CONFIG address, and the backend that computes the
// worker's slices of the model over that ring.
//
//   ModelParallelWorkerOptions options;
//   options.worker_index = 3;
//   options.worker_addresses = {...};  // every worker's, by task index
//   PSTRAIN_ASSIGN_OR_RETURN(ModelParallelWorker member,
//       StartModelParallelWorker(spec, setup, options));
//   trainer_options.backend = member.backend.get();
//
// The ring's server takes the worker's address, so it answers the worker's
// health check there (gRPC's default health service: enable it before).
#ifndef PSTRAIN_PARALLEL_MODEL_PARALLEL_WORKER_H_
#define PSTRAIN_PARALLEL_MODEL_PARALLEL_WORKER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collective/ring_participant.h"
#include "common/grpc_security.h"
#include "common/metrics.h"
#include "compute/backend.h"
#include "model/model_spec.h"
#include "parallel/group_collective.h"
#include "parallel/tensor_parallel_member.h"
#include "parallel/tensor_parallel_setup.h"

namespace pstrain {
namespace parallel {

struct ModelParallelWorkerOptions {
  int worker_index = 0;
  // Every worker's address ("host:port"), by task index.
  std::vector<std::string> worker_addresses;
  // How long one exchange with the group may take.
  absl::Duration timeout = absl::Seconds(30);
  GrpcSecurity security;
  TensorParallelMemberOptions member;
  // Where the group's traffic is counted (RingGroupCollective), or null.
  Counter* group_bytes_sent = nullptr;
  Counter* group_bytes_received = nullptr;
};

// Destroyed in reverse order: the backend before the group it uses, the
// group before its ring.
struct ModelParallelWorker {
  std::unique_ptr<collective::RingParticipant> ring;
  std::unique_ptr<GroupCollective> group;
  std::unique_ptr<worker::Backend> backend;
  // What it computes on, for logs and metrics.
  std::string device;
};

// INVALID_ARGUMENT for a worker index or addresses that do not fit
// setup.mesh; RingParticipant::Start's and TensorParallelBackend::Create's
// errors.
absl::StatusOr<ModelParallelWorker> StartModelParallelWorker(
    const worker::ModelSpec& spec, const TensorParallelSetup& setup,
    const ModelParallelWorkerOptions& options);

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_MODEL_PARALLEL_WORKER_H_

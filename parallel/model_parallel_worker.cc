#include "parallel/model_parallel_worker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "parallel/ring_group_collective.h"
#include "parallel/tensor_parallel_backend.h"

namespace pstrain {
namespace parallel {

absl::StatusOr<ModelParallelWorker> StartModelParallelWorker(
    const worker::ModelSpec& spec, const TensorParallelSetup& setup,
    const ModelParallelWorkerOptions& options) {
  const Mesh& mesh = setup.mesh;
  const int workers = static_cast<int>(options.worker_addresses.size());
  if (workers != mesh.data * mesh.model || options.worker_index < 0 ||
      options.worker_index >= workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", options.worker_index, " of ", workers,
        " does not fit the mesh data:", mesh.data, ",model:", mesh.model));
  }
  const MeshCoordinates at = mesh.CoordinatesOf(options.worker_index);
  collective::RingParticipantOptions ring;
  ring.rank = at.model;
  for (int w : mesh.GroupMembers(at.data)) {
    ring.peers.push_back(options.worker_addresses[w]);
  }
  ring.timeout = options.timeout;
  ring.security = options.security;
  ModelParallelWorker member;
  PSTRAIN_ASSIGN_OR_RETURN(member.ring,
                           collective::RingParticipant::Start(std::move(ring)));
  member.group = std::make_unique<RingGroupCollective>(
      member.ring->ring(), at.model, mesh.model, /*first_id=*/1,
      options.group_bytes_sent, options.group_bytes_received);
  PSTRAIN_ASSIGN_OR_RETURN(
      member.backend,
      TensorParallelBackend::Create(spec, setup.plans[at.model],
                                    member.group.get(), options.member));
  member.device = absl::StrCat("CPU, member ", at.model,
                               " of model-parallel group ", at.data);
  return member;
}

}  // namespace parallel
}  // namespace pstrain

#include "worker/nccl_id_relay.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace worker {

void RelayNcclIdsThroughChief(chief::ChiefClient* chief,
                              collective::NcclRendezvousOptions* options) {
  options->publish = [chief](int64_t generation,
                             const std::string& id) -> absl::Status {
    PSTRAIN_ASSIGN_OR_RETURN(HeartbeatResponse beat,
                             chief->PublishNcclId(generation, id));
    if (beat.nccl_unique_id() != id) {
      return absl::AbortedError(absl::StrCat(
          "the chief, in generation ", beat.generation(),
          ", did not take the NCCL id of generation ", generation));
    }
    return absl::OkStatus();
  };
  options->fetch =
      [chief](int64_t generation) -> absl::StatusOr<std::string> {
    PSTRAIN_ASSIGN_OR_RETURN(HeartbeatResponse beat, chief->Heartbeat(-1));
    if (beat.generation() != generation) {
      return absl::AbortedError(
          absl::StrCat("the chief went on to generation ", beat.generation(),
                       " while this worker joined ", generation));
    }
    return beat.nccl_unique_id();
  };
}

}  // namespace worker
}  // namespace pstrain

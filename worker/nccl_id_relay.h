// How a collective run's GPU workers agree on each generation's NCCL id
// (collective/nccl_rendezvous.h) through the chief: worker 0 publishes the
// id it made in a heartbeat, which the chief keeps for that generation
// only; the other workers fetch it from the chief's heartbeat answers.
#ifndef PSTRAIN_WORKER_NCCL_ID_RELAY_H_
#define PSTRAIN_WORKER_NCCL_ID_RELAY_H_

#include "chief/chief_client.h"
#include "collective/nccl_rendezvous.h"

namespace pstrain {
namespace worker {

// Sets options->publish and options->fetch to go through `chief`, which
// must outlive the rendezvous. ABORTED when the chief did not take the id
// (it went on to another generation) or answers for another generation.
void RelayNcclIdsThroughChief(chief::ChiefClient* chief,
                              collective::NcclRendezvousOptions* options);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_WORKER_NCCL_ID_RELAY_H_

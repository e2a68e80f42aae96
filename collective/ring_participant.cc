#include "collective/ring_participant.h"

#include <utility>

#include "absl/time/clock.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_options.h"
#include "common/host_port.h"
#include "common/status_macros.h"

namespace pstrain {
namespace collective {

absl::StatusOr<std::unique_ptr<RingParticipant>> RingParticipant::Start(
    RingParticipantOptions options) {
  const int size = static_cast<int>(options.peers.size());
  if (options.rank < 0 || options.rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", options.rank, " must be in [0, ", size, "), one per peer"));
  }
  for (const std::string& peer : options.peers) {
    PSTRAIN_RETURN_IF_ERROR(ParseHostPort(peer).status());
  }
  std::string listen = options.listen_address;
  if (listen.empty()) {
    listen = options.peers[options.rank];
    if (!IsLoopbackAddress(listen)) {
      listen = absl::StrCat("0.0.0.0:", ParseHostPort(listen)->port);
    }
  }

  std::unique_ptr<RingParticipant> participant(new RingParticipant());
  participant->transport_ = std::make_unique<RingGrpcTransport>(
      options.peers[(options.rank + 1) % size], options.security);
  RingAllReduceOptions ring;
  ring.rank = options.rank;
  ring.size = size;
  ring.peer_names = options.peers;
  ring.chunk_bytes = options.chunk_bytes;
  ring.dtype = options.dtype;
  ring.timeout = options.timeout;
  PSTRAIN_ASSIGN_OR_RETURN(
      participant->ring_,
      RingAllReduce::Create(std::move(ring), participant->transport_.get()));
  participant->service_ = std::make_unique<RingService>(
      participant->ring_.get(), options.security);
  int bound_port = 0;
  PSTRAIN_ASSIGN_OR_RETURN(
      participant->server_,
      StartPstrainServer(listen, {participant->service_.get()}, &bound_port,
                         options.security));
  return participant;
}

RingParticipant::~RingParticipant() { Stop(); }

void RingParticipant::Stop(absl::Duration grace) {
  if (ring_ != nullptr) ring_->Shutdown();
  if (server_ != nullptr) {
    // At the deadline, the calls still in flight are cancelled.
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server_->Wait();
    server_.reset();
  }
}

}  // namespace collective
}  // namespace pstrain

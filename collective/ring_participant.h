// One participant of a ring all-reduce over gRPC, assembled: the ring's
// logic (collective/ring_allreduce.h), its gRPC transport to the right
// neighbour and its RingCollective server for the left one. What a worker in
// collective mode, a benchmark or a test holds.
//
//   RingParticipantOptions options;
//   options.rank = 1;
//   options.peers = {"10.0.0.1:2223", "10.0.0.2:2223", "10.0.0.3:2223"};
//   PSTRAIN_ASSIGN_OR_RETURN(auto participant,
//                            RingParticipant::Start(options));
//   PSTRAIN_RETURN_IF_ERROR(participant->ring()->AllReduce(step, gradients));
#ifndef PSTRAIN_COLLECTIVE_RING_PARTICIPANT_H_
#define PSTRAIN_COLLECTIVE_RING_PARTICIPANT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collective/ring_allreduce.h"
#include "collective/ring_grpc_transport.h"
#include "collective/ring_service.h"
#include "common/grpc_security.h"
#include "grpcpp/grpcpp.h"

namespace pstrain {
namespace collective {

struct RingParticipantOptions {
  // This participant's rank: its index in `peers`.
  int rank = 0;
  // Every participant's address ("host:port"), by rank; the ring's order.
  std::vector<std::string> peers;
  // Where this participant's server listens; "" : peers[rank], on every
  // interface ("0.0.0.0:<its port>") unless that is a loopback address.
  std::string listen_address;
  // As RingAllReduceOptions.
  int64_t chunk_bytes = 1 << 20;
  RingDtype dtype = RING_DTYPE_FLOAT32;
  absl::Duration timeout = absl::Seconds(30);
  // mTLS and token for both directions (common/grpc_security.h).
  GrpcSecurity security;
};

class RingParticipant {
 public:
  // Starts the server. INVALID_ARGUMENT for bad options (a rank outside
  // `peers`, a malformed address); UNAVAILABLE if it cannot listen.
  static absl::StatusOr<std::unique_ptr<RingParticipant>> Start(
      RingParticipantOptions options);
  // Stop()s.
  ~RingParticipant();
  RingParticipant(const RingParticipant&) = delete;
  RingParticipant& operator=(const RingParticipant&) = delete;

  RingAllReduce* ring() { return ring_.get(); }

  // Gives up the running all-reduce, refuses later ones, and shuts the
  // server down, letting the streams in flight end for up to `grace` (the
  // left neighbour's last stream of a finished all-reduce stays open until
  // it has sent its end) and then breaking them off. Stop(ZeroDuration())
  // is what a crash looks like to the neighbours. Idempotent.
  void Stop(absl::Duration grace = absl::Seconds(5));

 private:
  RingParticipant() = default;

  std::unique_ptr<RingGrpcTransport> transport_;
  std::unique_ptr<RingAllReduce> ring_;
  std::unique_ptr<RingService> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_RING_PARTICIPANT_H_

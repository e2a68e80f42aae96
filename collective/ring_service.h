// The gRPC face of a RingAllReduce's receiving side: serves RingCollective
// (proto/collective.proto). Each SendChunks stream is read on a thread of
// the server and its messages handed to the ring (Accept, Deliver, Close);
// every decision is the ring's. A call without the auth token (when the
// security has one) is refused before anything is read.
#ifndef PSTRAIN_COLLECTIVE_RING_SERVICE_H_
#define PSTRAIN_COLLECTIVE_RING_SERVICE_H_

#include "collective/ring_allreduce.h"
#include "common/grpc_security.h"
#include "grpcpp/grpcpp.h"
#include "proto/collective.grpc.pb.h"

namespace pstrain {
namespace collective {

class RingService final : public RingCollective::Service {
 public:
  // `ring` must outlive the service.
  RingService(RingAllReduce* ring, GrpcSecurity security)
      : ring_(ring), security_(std::move(security)) {}

  grpc::Status SendChunks(grpc::ServerContext* context,
                          grpc::ServerReader<RingMessage>* reader,
                          RingAck* ack) override;

 private:
  RingAllReduce* const ring_;
  const GrpcSecurity security_;
};

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_RING_SERVICE_H_

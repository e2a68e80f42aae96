// The gRPC face of a RingAllReduce's receiving side: serves RingCollective
// (proto/collective.proto). Each SendChunks stream is read on a thread of
// the server and its messages handed to the ring (Accept, Deliver, Close);
// every decision is the ring's. The method is registered by hand rather
// than through the generated service so that chunks arrive as byte buffers
// whose payloads the ring reads in place. A call without the auth token (when
// the security has one) is refused before anything is read.
#ifndef PSTRAIN_COLLECTIVE_RING_SERVICE_H_
#define PSTRAIN_COLLECTIVE_RING_SERVICE_H_

#include "collective/ring_allreduce.h"
#include "common/grpc_security.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/service_type.h"
#include "proto/collective.pb.h"

namespace pstrain {
namespace collective {

class RingService final : public grpc::Service {
 public:
  // `ring` must outlive the service.
  RingService(RingAllReduce* ring, GrpcSecurity security);

 private:
  // RingCollective.SendChunks, its messages read as gRPC byte buffers
  // (collective/ring_wire.h decodes them, leaving payloads in place).
  grpc::Status SendChunks(grpc::ServerContext* context,
                          grpc::ServerReader<grpc::ByteBuffer>* reader,
                          RingAck* ack);

  RingAllReduce* const ring_;
  const GrpcSecurity security_;
};

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_RING_SERVICE_H_

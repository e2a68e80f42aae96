// The sending half of the ring over gRPC: streams a participant's chunks to
// its right neighbour's RingCollective service (collective/ring_service.h),
// one client-streaming SendChunks call per all-reduce, on one channel kept
// for the participant's life. Chunks are encoded by hand into gRPC byte
// buffers, the payload copied once (collective/ring_wire.h). The channel is
// made at the first stream, when the neighbour is likely up: to a loopback
// neighbour it then goes over the local socket (common/grpc_options.h).
#ifndef PSTRAIN_COLLECTIVE_RING_GRPC_TRANSPORT_H_
#define PSTRAIN_COLLECTIVE_RING_GRPC_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "collective/ring_transport.h"
#include "common/grpc_security.h"
#include "grpcpp/grpcpp.h"
#include "proto/collective.grpc.pb.h"

namespace pstrain {
namespace collective {

class RingGrpcTransport final : public RingTransport {
 public:
  // `right_address`: "host:port" of the right neighbour.
  RingGrpcTransport(std::string right_address, GrpcSecurity security)
      : right_address_(std::move(right_address)),
        security_(std::move(security)) {}

  std::unique_ptr<RingStream> NewStream() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string right_address_;
  const GrpcSecurity security_;
  absl::Mutex mu_;
  std::shared_ptr<grpc::Channel> channel_ ABSL_GUARDED_BY(mu_);
};

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_RING_GRPC_TRANSPORT_H_

#include "collective/ring_service.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "collective/ring_wire.h"
#include "common/grpc_status.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/support/method_handler.h"

namespace pstrain {
namespace collective {

RingService::RingService(RingAllReduce* ring, GrpcSecurity security)
    : ring_(ring), security_(std::move(security)) {
  AddMethod(new grpc::internal::RpcServiceMethod(
      "/pstrain.RingCollective/SendChunks",
      grpc::internal::RpcMethod::CLIENT_STREAMING,
      new grpc::internal::ClientStreamingHandler<RingService, grpc::ByteBuffer,
                                                 RingAck>(
          [](RingService* service, grpc::ServerContext* context,
             grpc::ServerReader<grpc::ByteBuffer>* reader, RingAck* ack) {
            return service->SendChunks(context, reader, ack);
          },
          this)));
}

grpc::Status RingService::SendChunks(
    grpc::ServerContext* context, grpc::ServerReader<grpc::ByteBuffer>* reader,
    RingAck* ack) {
  absl::Status status = CheckAuthToken(*context, security_.auth_token);
  if (!status.ok()) return ToGrpcStatus(status);
  grpc::ByteBuffer buffer;
  DecodedRingMessage decoded;
  if (!reader->Read(&buffer) || !DecodeRingMessage(buffer, &decoded).ok() ||
      !decoded.message.has_header()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        "SendChunks: the stream must start with a RingStreamHeader"));
  }
  const uint64_t id = decoded.message.header().collective_id();
  status = ring_->Accept(decoded.message.header());
  if (!status.ok()) return ToGrpcStatus(status);
  std::string abort_reason;
  while (status.ok() && reader->Read(&buffer)) {
    status = DecodeRingMessage(buffer, &decoded);
    if (!status.ok()) break;
    const RingMessage& message = decoded.message;
    switch (message.kind_case()) {
      case RingMessage::kChunk:
        status = ring_->Deliver(id, message.chunk().step(),
                                message.chunk().index(), decoded.payload);
        break;
      case RingMessage::kAbort:
        abort_reason = message.abort();
        break;
      default:
        status = absl::InvalidArgumentError(
            "SendChunks: after the header, only chunks and an abort");
    }
  }
  // Ended: by the sender (WritesDone), broken off (cancelled, connection
  // lost), or refused here. The ring tells which from what it received.
  ring_->Close(id, abort_reason);
  return ToGrpcStatus(status);
}

}  // namespace collective
}  // namespace pstrain

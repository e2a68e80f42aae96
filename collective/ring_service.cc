#include "collective/ring_service.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "common/grpc_status.h"

namespace pstrain {
namespace collective {

grpc::Status RingService::SendChunks(grpc::ServerContext* context,
                                     grpc::ServerReader<RingMessage>* reader,
                                     RingAck* ack) {
  absl::Status status = CheckAuthToken(*context, security_.auth_token);
  if (!status.ok()) return ToGrpcStatus(status);
  RingMessage message;
  if (!reader->Read(&message) || !message.has_header()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        "SendChunks: the stream must start with a RingStreamHeader"));
  }
  const uint64_t id = message.header().collective_id();
  status = ring_->Accept(message.header());
  if (!status.ok()) return ToGrpcStatus(status);
  std::string abort_reason;
  while (status.ok() && reader->Read(&message)) {
    switch (message.kind_case()) {
      case RingMessage::kChunk: {
        RingChunk* chunk = message.mutable_chunk();
        status = ring_->Deliver(id, chunk->step(), chunk->index(),
                                std::move(*chunk->mutable_payload()));
        break;
      }
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

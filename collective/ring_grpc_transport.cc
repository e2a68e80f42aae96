#include "collective/ring_grpc_transport.h"

#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "common/grpc_options.h"
#include "common/grpc_status.h"
#include "google/protobuf/io/coded_stream.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace pstrain {
namespace collective {
namespace {

// The RingMessage bytes of a chunk, encoded by hand: the short prefix
// (field tags, step, index, lengths) in one slice and the payload, copied
// once, in another. Serializing a RingMessage would copy the payload twice
// (into the message, then into gRPC's buffer). On the wire it is an
// ordinary RingMessage; the receiving service parses it with the generated
// code.
grpc::ByteBuffer EncodeChunk(int step, int index, absl::string_view payload) {
  using google::protobuf::io::CodedOutputStream;
  // RingChunk: 1 step (varint), 2 index (varint), 3 payload (bytes).
  uint8_t fields[32];
  uint8_t* end = fields;
  *end++ = 0x08;
  end =
      CodedOutputStream::WriteVarint64ToArray(static_cast<int64_t>(step), end);
  *end++ = 0x10;
  end =
      CodedOutputStream::WriteVarint64ToArray(static_cast<int64_t>(index), end);
  *end++ = 0x1a;
  end = CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>(payload.size()), end);
  const size_t chunk_size = (end - fields) + payload.size();
  // RingMessage: 2 chunk (length-delimited).
  uint8_t prefix[48];
  uint8_t* at = prefix;
  *at++ = 0x12;
  at = CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>(chunk_size), at);
  std::memcpy(at, fields, end - fields);
  at += end - fields;
  grpc::Slice slices[2] = {grpc::Slice(prefix, at - prefix),
                           grpc::Slice(payload.data(), payload.size())};
  return grpc::ByteBuffer(slices, 2);
}

grpc::ByteBuffer Encode(const RingMessage& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

class GrpcRingStream final : public RingStream {
 public:
  explicit GrpcRingStream(std::shared_ptr<grpc::Channel> channel)
      : channel_(std::move(channel)) {
    // Wait for the neighbour to come up (until cancelled); the header goes
    // out with the first message rather than in a round of its own.
    context_.set_wait_for_ready(true);
    context_.set_initial_metadata_corked(true);
  }

  absl::Status Start(const RingStreamHeader& header) override {
    // The generated stub's SendChunks, writing byte buffers.
    writer_.reset(grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
        channel_.get(),
        grpc::internal::RpcMethod(kSendChunksMethod,
                                  grpc::internal::RpcMethod::CLIENT_STREAMING,
                                  channel_),
        &context_, &ack_));
    RingMessage message;
    *message.mutable_header() = header;
    return WriteMessage(Encode(message));
  }

  absl::Status Write(int step, int index, absl::string_view payload) override {
    return WriteMessage(EncodeChunk(step, index, payload));
  }

  absl::Status Finish(absl::string_view abort_reason) override {
    if (writer_ == nullptr) return absl::CancelledError("never started");
    if (finished_) return final_;
    if (!abort_reason.empty()) {
      RingMessage message;
      message.set_abort(std::string(abort_reason));
      writer_->Write(Encode(message));
    }
    writer_->WritesDone();
    return FinishCall();
  }

  void Cancel() override { context_.TryCancel(); }

 private:
  static constexpr char kSendChunksMethod[] =
      "/pstrain.RingCollective/SendChunks";

  absl::Status WriteMessage(const grpc::ByteBuffer& message) {
    if (writer_->Write(message)) return absl::OkStatus();
    return FinishCall();  // the reason the stream broke
  }

  absl::Status FinishCall() {
    if (!finished_) {
      final_ = FromGrpcStatus(writer_->Finish());
      finished_ = true;
    }
    return final_;
  }

  const std::shared_ptr<grpc::Channel> channel_;
  grpc::ClientContext context_;
  RingAck ack_;
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer_;
  bool finished_ = false;
  absl::Status final_;
};

}  // namespace

std::unique_ptr<RingStream> RingGrpcTransport::NewStream() {
  absl::MutexLock lock(&mu_);
  if (channel_ == nullptr) {
    channel_ = CreatePstrainChannel(right_address_, security_);
  }
  return std::make_unique<GrpcRingStream>(channel_);
}

}  // namespace collective
}  // namespace pstrain

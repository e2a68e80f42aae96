#include "collective/ring_grpc_transport.h"

#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "collective/ring_wire.h"
#include "common/grpc_options.h"
#include "common/grpc_status.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace pstrain {
namespace collective {
namespace {

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
    return WriteMessage(EncodeRingMessage(message));
  }

  absl::Status Write(int step, int index, absl::string_view payload) override {
    return WriteMessage(EncodeRingChunk(step, index, payload));
  }

  absl::Status Finish(absl::string_view abort_reason) override {
    if (writer_ == nullptr) return absl::CancelledError("never started");
    if (finished_) return final_;
    if (!abort_reason.empty()) {
      RingMessage message;
      message.set_abort(std::string(abort_reason));
      writer_->Write(EncodeRingMessage(message));
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

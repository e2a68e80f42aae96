#include "collective/ring_grpc_transport.h"

#include <utility>

#include "absl/status/status.h"
#include "common/grpc_options.h"
#include "common/grpc_status.h"

namespace pstrain {
namespace collective {
namespace {

class GrpcRingStream final : public RingStream {
 public:
  explicit GrpcRingStream(RingCollective::Stub* stub) : stub_(stub) {
    // Wait for the neighbour to come up (until cancelled); the header goes
    // out with the first message rather than in a round of its own.
    context_.set_wait_for_ready(true);
    context_.set_initial_metadata_corked(true);
  }

  absl::Status Start(const RingStreamHeader& header) override {
    writer_ = stub_->SendChunks(&context_, &ack_);
    *message_.mutable_header() = header;
    return WriteMessage();
  }

  absl::Status Write(int step, int index, absl::string_view payload) override {
    RingChunk* chunk = message_.mutable_chunk();
    chunk->set_step(step);
    chunk->set_index(index);
    chunk->set_payload(payload.data(), payload.size());
    return WriteMessage();
  }

  absl::Status Finish(absl::string_view abort_reason) override {
    if (writer_ == nullptr) return absl::CancelledError("never started");
    if (finished_) return final_;
    if (!abort_reason.empty()) {
      message_.set_abort(std::string(abort_reason));
      writer_->Write(message_);
    }
    writer_->WritesDone();
    return FinishCall();
  }

  void Cancel() override { context_.TryCancel(); }

 private:
  absl::Status WriteMessage() {
    if (writer_->Write(message_)) return absl::OkStatus();
    return FinishCall();  // the reason the stream broke
  }

  absl::Status FinishCall() {
    if (!finished_) {
      final_ = FromGrpcStatus(writer_->Finish());
      finished_ = true;
    }
    return final_;
  }

  RingCollective::Stub* const stub_;
  grpc::ClientContext context_;
  RingAck ack_;
  std::unique_ptr<grpc::ClientWriter<RingMessage>> writer_;
  RingMessage message_;
  bool finished_ = false;
  absl::Status final_;
};

}  // namespace

std::unique_ptr<RingStream> RingGrpcTransport::NewStream() {
  absl::MutexLock lock(&mu_);
  if (stub_ == nullptr) {
    stub_ = RingCollective::NewStub(
        CreatePstrainChannel(right_address_, security_));
  }
  return std::make_unique<GrpcRingStream>(stub_.get());
}

}  // namespace collective
}  // namespace pstrain

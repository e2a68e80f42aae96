#include "ps/dense_call.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"

namespace pstrain {
namespace ps {
namespace {

absl::Status Unexpected(absl::string_view what) {
  return absl::InternalError(absl::StrCat("ps sent ", what));
}

// Copies one pulled chunk, `value` read at `version` with `content`
// (`size` bytes) as its content, into the piece it belongs to, after
// checking that it is one: a variable asked for, bytes inside the piece, the
// same version as the variable's other chunks.
absl::Status TakeChunk(const NamedTensor& value, int64_t version,
                       absl::Span<const absl::string_view> content,
                       int64_t size,
                       const std::map<std::string, const DensePiece*>& by_name,
                       std::map<std::string, int64_t>* received,
                       std::map<std::string, int64_t>* versions) {
  auto it = by_name.find(value.name());
  if (it == by_name.end()) {
    return Unexpected(
        absl::StrCat("variable '", value.name(), "' that was not asked for"));
  }
  const DensePiece& piece = *it->second;
  const int64_t offset = value.tensor().content_offset();
  if (offset < 0 || offset > piece.size - size) {
    return Unexpected(absl::StrCat("a chunk of '", piece.name, "' at byte ",
                                   offset, " beyond its ", piece.size,
                                   " bytes"));
  }
  auto [seen, first] = versions->emplace(piece.name, version);
  if (!first && seen->second != version) {
    return Unexpected(
        absl::StrCat("chunks of '", piece.name, "' from two versions"));
  }
  char* out = piece.data + offset;
  for (absl::string_view part : content) {
    std::memcpy(out, part.data(), part.size());
    out += part.size();
  }
  (*received)[piece.name] += size;
  return absl::OkStatus();
}

// A push's messages on the wire: unary when it is one message (the usual
// case: on the wire a client-streaming call of one message is a unary call,
// and as one it goes in a single batch of operations), else streamed.
class PushCall : public DenseCall {
 public:
  // `borrowed` lends the gradients in `messages` (see EncodePushDenseRequest).
  PushCall(const CallTarget& target,
           const grpc::internal::RpcMethod& unary_method,
           const grpc::internal::RpcMethod& stream_method,
           std::unique_ptr<BorrowedContent> borrowed,
           std::vector<grpc::ByteBuffer> messages,
           absl::StatusOr<PushDenseResponse>* result)
      : borrowed_(std::move(borrowed)),
        messages_(std::move(messages)),
        result_(result) {
    context_.set_deadline(absl::ToChronoTime(target.deadline));
    if (messages_.size() == 1) {
      unary_.reset(grpc::internal::ClientAsyncResponseReaderHelper::Create<
                   PushDenseResponse>(target.channel, target.cq, unary_method,
                                      &context_, messages_[0]));
      unary_->StartCall();
      unary_->Finish(&response_, &status_, this);
      state_ = kFinishing;
      return;
    }
    stream_.reset(
        grpc::internal::ClientAsyncWriterFactory<grpc::ByteBuffer>::Create(
            target.channel, target.cq, stream_method, &context_, &response_,
            /*start=*/true, this));
    state_ = kWriting;
  }

  bool Proceed(bool ok) override {
    switch (state_) {
      case kWriting:
        // The start, or a write before the last, is done.
        if (ok && written_ < messages_.size()) {
          grpc::WriteOptions options;
          // The last write half-closes the stream, even when it fails.
          if (written_ + 1 == messages_.size()) options.set_last_message();
          stream_->Write(messages_[written_++], options, this);
          return true;
        }
        if (written_ < messages_.size()) {
          // Broken before the last message: close, then learn why.
          stream_->WritesDone(this);
          state_ = kClosing;
          return true;
        }
        [[fallthrough]];
      case kClosing:
        stream_->Finish(&status_, this);
        state_ = kFinishing;
        return true;
      case kFinishing:
        if (status_.ok()) {
          *result_ = response_;
        } else {
          *result_ = FromGrpcStatus(status_);
        }
        return false;
    }
    return false;
  }

 private:
  enum State { kWriting, kClosing, kFinishing };

  // Destroyed last: waits until gRPC has let go of the lent gradients.
  std::unique_ptr<BorrowedContent> borrowed_;
  std::vector<grpc::ByteBuffer> messages_;
  absl::StatusOr<PushDenseResponse>* const result_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<PushDenseResponse>> unary_;
  std::unique_ptr<grpc::ClientAsyncWriter<grpc::ByteBuffer>> stream_;
  PushDenseResponse response_;
  grpc::Status status_;
  State state_ = kWriting;
  size_t written_ = 0;
};

// A pull's reply messages, decoded in place (ps/tensor_encoding.h): the
// content is copied once, from gRPC's buffers into the pieces, instead of
// into a message string first.
class PullCall : public DenseCall {
 public:
  PullCall(const CallTarget& target, const grpc::internal::RpcMethod& method,
           const PullDenseRequest& request, absl::Span<const DensePiece> values,
           PullDenseView* view, absl::StatusOr<int64_t>* result,
           Counter* received_bytes)
      : values_(values),
        min_version_(request.min_version()),
        view_(view),
        result_(result),
        received_bytes_(received_bytes) {
    for (const DensePiece& piece : values) by_name_[piece.name] = &piece;
    context_.set_deadline(absl::ToChronoTime(target.deadline));
    reader_.reset(
        grpc::internal::ClientAsyncReaderFactory<grpc::ByteBuffer>::Create(
            target.channel, target.cq, method, &context_, request,
            /*start=*/true, this));
  }

  bool Proceed(bool ok) override {
    switch (state_) {
      case kStarting:
      case kReading:
        if (ok && state_ == kReading) Take();
        if (ok) {
          reader_->Read(&buffer_, this);
          state_ = kReading;
          return true;
        }
        reader_->Finish(&status_, this);
        state_ = kFinishing;
        return true;
      case kFinishing:
        *result_ = Result();
        return false;
    }
    return false;
  }

 private:
  enum State { kStarting, kReading, kFinishing };

  // Copies the chunks of the message read into the pieces.
  void Take() {
    if (received_bytes_ != nullptr && buffer_.Valid()) {
      received_bytes_->Increment(buffer_.Length());
    }
    if (!problem_.ok()) return;  // drain, then report
    slices_.clear();
    // An empty message may arrive as no buffer at all.
    if ((buffer_.Valid() && !buffer_.Dump(&slices_).ok()) ||
        !DecodePullDenseResponse(slices_, view_)) {
      problem_ = Unexpected("a PullDenseResponse that does not parse");
      return;
    }
    const PullDenseResponse& message = view_->header;
    if (message.values().empty()) {
      problem_ = Unexpected("a PullDenseResponse with no values");
      return;
    }
    for (int i = 0; i < message.values_size() && problem_.ok(); ++i) {
      problem_ =
          TakeChunk(message.values(i), message.version(), view_->Content(i),
                    view_->ContentSize(i), by_name_, &received_, &versions_);
    }
  }

  absl::StatusOr<int64_t> Result() {
    PSTRAIN_RETURN_IF_ERROR(FromGrpcStatus(status_));
    PSTRAIN_RETURN_IF_ERROR(problem_);
    for (const DensePiece& piece : values_) {
      if (received_[piece.name] != piece.size) {
        return Unexpected(absl::StrCat(received_[piece.name], " of the ",
                                       piece.size, " bytes of '", piece.name,
                                       "'"));
      }
    }
    if (versions_.empty()) return min_version_;
    int64_t version = INT64_MAX;
    for (const auto& [name, v] : versions_) version = std::min(version, v);
    return version;
  }

  const absl::Span<const DensePiece> values_;
  const int64_t min_version_;
  PullDenseView* const view_;
  absl::StatusOr<int64_t>* const result_;
  Counter* const received_bytes_;
  std::map<std::string, const DensePiece*> by_name_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientAsyncReader<grpc::ByteBuffer>> reader_;
  grpc::ByteBuffer buffer_;
  std::vector<grpc::Slice> slices_;
  grpc::Status status_;
  State state_ = kStarting;
  std::map<std::string, int64_t> received_;
  std::map<std::string, int64_t> versions_;
  absl::Status problem_;
};

}  // namespace

CallQueue::~CallQueue() {
  cq_.Shutdown();
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) {
  }
}

void RunCalls(absl::Span<DenseCall* const> calls, grpc::CompletionQueue* cq) {
  size_t pending = calls.size();
  void* tag;
  bool ok;
  while (pending > 0 && cq->Next(&tag, &ok)) {
    if (!static_cast<DenseCall*>(tag)->Proceed(ok)) --pending;
  }
}

std::unique_ptr<DenseCall> StartPushCall(
    const CallTarget& target, const grpc::internal::RpcMethod& unary_method,
    const grpc::internal::RpcMethod& stream_method,
    std::unique_ptr<BorrowedContent> borrowed,
    std::vector<grpc::ByteBuffer> messages,
    absl::StatusOr<PushDenseResponse>* result) {
  return std::make_unique<PushCall>(target, unary_method, stream_method,
                                    std::move(borrowed), std::move(messages),
                                    result);
}

std::unique_ptr<DenseCall> StartPullCall(
    const CallTarget& target, const grpc::internal::RpcMethod& method,
    const PullDenseRequest& request, absl::Span<const DensePiece> values,
    PullDenseView* view, absl::StatusOr<int64_t>* result,
    Counter* received_bytes) {
  return std::make_unique<PullCall>(target, method, request, values, view,
                                    result, received_bytes);
}

}  // namespace ps
}  // namespace pstrain

#include "ps/sparse_call.h"

#include <utility>

#include "common/grpc_status.h"

namespace pstrain {
namespace ps {
namespace {

// A unary call: one completion (its Finish) ends it.
template <typename Response>
class UnaryCall : public DenseCall {
 public:
  UnaryCall(absl::Time deadline, absl::StatusOr<Response>* result)
      : result_(result) {
    context_.set_deadline(absl::ToChronoTime(deadline));
  }

  // Starts `reader`, made by the stub's PrepareAsync method on context().
  void Start(std::unique_ptr<grpc::ClientAsyncResponseReaderInterface<Response>>
                 reader) {
    reader_ = std::move(reader);
    reader_->StartCall();
    reader_->Finish(&response_, &status_, this);
  }

  grpc::ClientContext* context() { return &context_; }

  bool Proceed(bool ok) override {
    if (!ok) {
      // Finish always completes with ok; kept as an error all the same.
      *result_ = absl::InternalError("a sparse call's completion failed");
    } else if (!status_.ok()) {
      *result_ = FromGrpcStatus(status_);
    } else {
      *result_ = std::move(response_);
    }
    return false;
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientAsyncResponseReaderInterface<Response>> reader_;
  Response response_;
  grpc::Status status_;
  absl::StatusOr<Response>* const result_;
};

}  // namespace

std::unique_ptr<DenseCall> StartPullSparseCall(
    ParameterServer::StubInterface* stub, const PullSparseRequest& request,
    absl::Time deadline, grpc::CompletionQueue* cq,
    absl::StatusOr<PullSparseResponse>* result) {
  auto call = std::make_unique<UnaryCall<PullSparseResponse>>(deadline, result);
  call->Start(stub->PrepareAsyncPullSparse(call->context(), request, cq));
  return call;
}

std::unique_ptr<DenseCall> StartPushSparseCall(
    ParameterServer::StubInterface* stub, const PushSparseRequest& request,
    absl::Time deadline, grpc::CompletionQueue* cq,
    absl::StatusOr<PushSparseResponse>* result) {
  auto call = std::make_unique<UnaryCall<PushSparseResponse>>(deadline, result);
  call->Start(stub->PrepareAsyncPushSparse(call->context(), request, cq));
  return call;
}

}  // namespace ps
}  // namespace pstrain

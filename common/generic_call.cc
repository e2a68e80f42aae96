#include "common/generic_call.h"

#include <utility>

namespace pstrain {

GenericCall::GenericCall(grpc::AsyncGenericService* service,
                         grpc::ServerCompletionQueue* cq)
    : stream_(&context_) {
  service->RequestCall(&context_, &stream_, cq, cq, this);
}

void GenericCall::Proceed(bool ok) {
  switch (state_) {
    case State::kWaiting:
      if (!ok) {  // the server is shutting down
        delete this;
        return;
      }
      state_ = State::kReading;
      Matched();
      return;
    case State::kReading:
      if (!ok) {  // the client half-closed
        HalfClosed();
        return;
      }
      {
        std::vector<grpc::Slice>& slices = requests_.emplace_back();
        if (incoming_.Valid() && !incoming_.Dump(&slices).ok()) {
          unreadable_ = true;
        }
        incoming_.Clear();
      }
      Received();
      return;
    case State::kWriting:
      if (!ok) {  // the client is gone: only the status is left to try
        replies_.clear();
        status_ =
            grpc::Status(grpc::StatusCode::UNAVAILABLE, "reply stream broken");
      }
      WriteNext();
      return;
    case State::kFinishing:
      delete this;
      return;
  }
}

void GenericCall::DeleteQueuedCalls(grpc::ServerCompletionQueue* cq) {
  cq->Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) delete static_cast<GenericCall*>(tag);
}

void GenericCall::ReadNext() { stream_.Read(&incoming_, this); }

void GenericCall::Finish(grpc::Status status) {
  requests_.clear();  // frees a push's gradients before the replies go
  status_ = std::move(status);
  if (!status_.ok()) replies_.clear();
  Finishing(status_);
  WriteNext();
}

void GenericCall::WriteNext() {
  if (written_ + 1 < replies_.size()) {
    state_ = State::kWriting;
    stream_.Write(replies_[written_++], this);
    return;
  }
  state_ = State::kFinishing;
  if (written_ < replies_.size()) {
    stream_.WriteAndFinish(replies_[written_++], grpc::WriteOptions(), status_,
                           this);
  } else {
    stream_.Finish(status_, this);
  }
}

}  // namespace pstrain

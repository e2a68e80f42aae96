#include "ps/ps_service.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_security.h"
#include "common/grpc_status.h"
#include "ps/tensor_encoding.h"

namespace pstrain {
namespace ps {
namespace {

// Counts a call as in flight (PsService::WaitUntilIdle) while it lives: a
// member of every call's reactor, which is deleted when the call is done.
class InFlight {
 public:
  explicit InFlight(PsService* service) : service_(service) {
    service_->CallStarted();
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  ~InFlight() { service_->CallDone(); }

 private:
  PsService* const service_;
};

class UnaryReactor : public grpc::ServerUnaryReactor {
 public:
  explicit UnaryReactor(PsService* service) : in_flight_(service) {}
  void OnDone() override { delete this; }

 private:
  InFlight in_flight_;
};

grpc::ServerUnaryReactor* Reply(PsService* service,
                                const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = new UnaryReactor(service);
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Ends a streaming call at once with `status`: a caller refused before its
// stream is read or written.
template <typename Reactor>
class Refusal : public Reactor {
 public:
  Refusal(PsService* service, const absl::Status& status)
      : in_flight_(service) {
    this->Finish(ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }

 private:
  InFlight in_flight_;
};

// Streams the chunks of one pull, as hand-encoded PullDenseResponse bytes
// (ps/tensor_encoding.h). gRPC sends a variable's value from where it lies
// when the variable lends it (an update meanwhile writes into a copy);
// otherwise each chunk is copied once, from the variable (under its lock)
// into the buffer gRPC sends. A message carries chunks of up to
// `chunk` bytes of content in all: a variable larger than that is split over
// several messages, several smaller ones share one (each message costs a
// write and a wake-up on both sides). A pull that may wait for a sync step
// (min_version > 0) is served on a pull thread; one that returns at once is
// served inline, saving a thread hand-off (it blocks only on the variables'
// locks, as a push applied on gRPC's threads does). The last message is
// written together with the status.
class PullReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  PullReactor(PsService* service, const grpc::ByteBuffer* raw_request)
      : in_flight_(service) {
    PullDenseRequest request;
    if (!ParseRequest(raw_request, &request)) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "PullDenseRequest does not parse"));
      return;
    }
    int64_t chunk = service->options().max_chunk_bytes;
    if (request.max_chunk_bytes() > 0) {
      chunk = std::min(chunk, request.max_chunk_bytes());
    }
    if (request.min_version() == 0) {
      Pull(service, request, chunk);
      return;
    }
    service->pull_pool()->Schedule(
        [this, service, request = std::move(request), chunk] {
          Pull(service, request, chunk);
        });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "pull stream broken"));
      return;
    }
    WriteNext();
  }

  void OnDone() override { delete this; }

 private:
  static bool ParseRequest(const grpc::ByteBuffer* raw,
                           PullDenseRequest* request) {
    // An empty message may arrive as no buffer at all.
    std::vector<grpc::Slice> slices;
    if (raw->Valid() && !raw->Dump(&slices).ok()) return false;
    std::string bytes;
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    return request->ParseFromString(bytes);
  }

  void Pull(PsService* service, const PullDenseRequest& request,
            int64_t chunk) {
    room_ = chunk;
    absl::Status status = service->shard()->PullDense(
        request, [this, chunk](const DenseVariable& v, const ValueView& value) {
          AddChunks(v, value, chunk);
        });
    if (status.ok()) Flush(chunk);
    if (!status.ok() || messages_.empty()) {
      Finish(ToGrpcStatus(status));
      return;
    }
    WriteNext();
  }

  void WriteNext() {
    const grpc::ByteBuffer* message = &messages_[next_++];
    if (next_ == messages_.size()) {
      StartWriteAndFinish(message, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      StartWrite(message);
    }
  }

  // Adds the chunks of `v` to the pending message, starting a new message
  // when it holds `chunk` bytes of content or chunks of another version. A
  // variable that does not fit in what is left of the pending message starts
  // a new one rather than fill it: a variable is split only where it must
  // be (it is larger than `chunk`), into chunks of `chunk` bytes. A value
  // lent by the variable (value.owner) is sent from where it lies, else
  // copied.
  void AddChunks(const DenseVariable& v, const ValueView& value, int64_t chunk) {
    const int64_t size = value.size;
    if (!pending_.empty() &&
        (value.version != pending_version_ || size > room_)) {
      Flush(chunk);
    }
    pending_version_ = value.version;
    NamedTensor named;
    named.set_name(v.name());
    TensorProto* t = named.mutable_tensor();
    t->set_dtype(DT_FLOAT);
    *t->mutable_shape() = v.def().shape();
    if (v.def().shape().dims_size() > 0) {
      t->mutable_slice()->set_begin(v.row_begin());
      t->mutable_slice()->set_end(v.row_end());
    }
    int64_t offset = 0;
    do {
      if (room_ == 0) Flush(chunk);
      const int64_t n = std::min(room_, size - offset);
      t->set_content_offset(offset);
      if (value.owner != nullptr) {
        LendPullDenseValue(named, value.data + offset, n, value.owner,
                           &pending_);
      } else {
        pending_.push_back(EncodePullDenseValue(named, value.data + offset, n));
      }
      offset += n;
      room_ -= n;
    } while (offset < size);
  }

  // Makes the pending chunks a message.
  void Flush(int64_t chunk) {
    if (!pending_.empty()) {
      PullDenseResponse header;
      header.set_version(pending_version_);
      messages_.push_back(EncodePullDenseResponse(header, pending_));
      pending_.clear();
    }
    room_ = chunk;
  }

  InFlight in_flight_;
  std::vector<grpc::ByteBuffer> messages_;
  size_t next_ = 0;
  // The message being filled: its chunks, their version, and the content
  // bytes it has room for.
  std::vector<grpc::Slice> pending_;
  int64_t pending_version_ = 0;
  int64_t room_ = 0;
};

// Collects a push stream's messages as bytes, then decodes them in place
// (ps/tensor_encoding.h: the gradients are read where gRPC received them,
// not copied into message strings first) and hands them to the Shard at
// once.
class PushReactor : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  PushReactor(PsService* service, grpc::CallbackServerContext* context,
              grpc::ByteBuffer* response)
      : in_flight_(service),
        service_(service),
        context_(context),
        response_(response) {
    StartRead(&next_);
  }

  void OnReadDone(bool ok) override {
    if (ok) {
      // An empty message may arrive as no buffer at all.
      std::vector<grpc::Slice>& slices = messages_.emplace_back();
      if (next_.Valid() && !next_.Dump(&slices).ok()) unreadable_ = true;
      next_.Clear();
      StartRead(&next_);
      return;
    }
    if (context_->IsCancelled()) {
      // The stream broke (client gone, message over the limit): nothing of
      // it is applied.
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "push stream broken"));
      return;
    }
    std::vector<PushDenseView> views(messages_.size());
    std::vector<const PushDenseView*> pointers;
    for (size_t i = 0; i < messages_.size(); ++i) {
      if (unreadable_ || !DecodePushDenseRequest(messages_[i], &views[i])) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "PushDenseRequest does not parse"));
        return;
      }
      pointers.push_back(&views[i]);
    }
    absl::StatusOr<PushDenseResponse> result =
        service_->shard()->PushDense(pointers);
    if (result.ok()) {
      grpc::Slice bytes(result->SerializeAsString());
      *response_ = grpc::ByteBuffer(&bytes, 1);
    }
    Finish(ToGrpcStatus(result.status()));
  }

  void OnDone() override { delete this; }

 private:
  InFlight in_flight_;
  PsService* const service_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const response_;
  grpc::ByteBuffer next_;
  // Each message's bytes, kept until the push is applied.
  std::vector<std::vector<grpc::Slice>> messages_;
  bool unreadable_ = false;
};

}  // namespace

PsService::PsService(Shard* shard, PsServiceOptions options)
    : shard_(shard), options_(options), pull_pool_(options.pull_threads) {}

PsService::~PsService() = default;

absl::Status PsService::Admit(const grpc::CallbackServerContext& context) {
  {
    absl::MutexLock lock(&mu_);
    if (refusing_) {
      return absl::UnavailableError(
          absl::StrCat("ps ", shard_->ps_task(), " is shutting down"));
    }
  }
  return CheckAuthToken(context, options_.auth_token);
}

void PsService::CallStarted() {
  absl::MutexLock lock(&mu_);
  ++calls_;
}

void PsService::CallDone() {
  absl::MutexLock lock(&mu_);
  --calls_;
}

void PsService::RefuseNewCalls() {
  absl::MutexLock lock(&mu_);
  refusing_ = true;
}

bool PsService::WaitUntilIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(
      absl::Condition(+[](int* calls) { return *calls == 0; }, &calls_),
      deadline);
}

grpc::ServerUnaryReactor* PsService::CreateVariables(
    grpc::CallbackServerContext* context, const CreateVariablesRequest* request,
    CreateVariablesResponse* response) {
  absl::Status admitted = Admit(*context);
  if (!admitted.ok()) return Reply(this, admitted);
  return Reply(this, shard_->CreateVariables(*request, response));
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* PsService::PullDense(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  absl::Status admitted = Admit(*context);
  if (!admitted.ok()) {
    return new Refusal<grpc::ServerWriteReactor<grpc::ByteBuffer>>(this,
                                                                   admitted);
  }
  return new PullReactor(this, request);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* PsService::PushDense(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  absl::Status admitted = Admit(*context);
  if (!admitted.ok()) {
    return new Refusal<grpc::ServerReadReactor<grpc::ByteBuffer>>(this,
                                                                  admitted);
  }
  return new PushReactor(this, context, response);
}

grpc::ServerUnaryReactor* PsService::PullSparse(
    grpc::CallbackServerContext* context, const PullSparseRequest* request,
    PullSparseResponse* response) {
  absl::Status admitted = Admit(*context);
  if (!admitted.ok()) return Reply(this, admitted);
  // On a pull thread: a sync pull may wait for its step.
  grpc::ServerUnaryReactor* reactor = new UnaryReactor(this);
  pull_pool_.Schedule([this, reactor, request, response] {
    reactor->Finish(ToGrpcStatus(shard_->PullSparse(*request, response)));
  });
  return reactor;
}

grpc::ServerUnaryReactor* PsService::PushSparse(
    grpc::CallbackServerContext* context, const PushSparseRequest* request,
    PushSparseResponse* response) {
  absl::Status admitted = Admit(*context);
  if (!admitted.ok()) return Reply(this, admitted);
  return Reply(this, shard_->PushSparse(*request, response));
}

grpc::ServerUnaryReactor* PsService::Save(grpc::CallbackServerContext* context,
                                          const SaveRequest* request,
                                          SaveResponse* response) {
  absl::Status admitted = Admit(*context);
  if (!admitted.ok()) return Reply(this, admitted);
  // File I/O: on a pull thread, not gRPC's.
  grpc::ServerUnaryReactor* reactor = new UnaryReactor(this);
  pull_pool_.Schedule([this, reactor, request, response] {
    reactor->Finish(ToGrpcStatus(shard_->Save(*request, response)));
  });
  return reactor;
}

grpc::ServerUnaryReactor* PsService::Restore(
    grpc::CallbackServerContext* context, const RestoreRequest* request,
    RestoreResponse* response) {
  absl::Status admitted = Admit(*context);
  if (!admitted.ok()) return Reply(this, admitted);
  grpc::ServerUnaryReactor* reactor = new UnaryReactor(this);
  pull_pool_.Schedule([this, reactor, request, response] {
    reactor->Finish(ToGrpcStatus(shard_->Restore(*request, response)));
  });
  return reactor;
}

grpc::ServerUnaryReactor* PsService::GetShardStatus(
    grpc::CallbackServerContext* context, const GetShardStatusRequest* request,
    ShardStatus* response) {
  absl::Status admitted = Admit(*context);
  if (!admitted.ok()) return Reply(this, admitted);
  return Reply(this, shard_->GetShardStatus(*request, response));
}

grpc::ServerUnaryReactor* PsService::SetWorkers(
    grpc::CallbackServerContext* context, const SetWorkersRequest* request,
    SetWorkersResponse* response) {
  absl::Status admitted = Admit(*context);
  if (!admitted.ok()) return Reply(this, admitted);
  return Reply(this, shard_->SetWorkers(*request, response));
}

}  // namespace ps
}  // namespace pstrain

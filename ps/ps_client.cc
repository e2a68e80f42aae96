#include "ps/ps_client.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/grpc_status.h"
#include "common/placement.h"
#include "common/status_context.h"
#include "common/status_macros.h"
#include "ps/tensor_encoding.h"

namespace pstrain {
namespace ps {
namespace {

absl::Status Unexpected(absl::string_view what) {
  return absl::InternalError(absl::StrCat("ps sent ", what));
}

void DescribePiece(const DensePiece& piece, TensorProto* t) {
  t->set_dtype(DT_FLOAT);
  *t->mutable_shape() = piece.shape;
  t->clear_slice();
  if (piece.shape.dims_size() > 0) {
    t->mutable_slice()->set_begin(piece.row_begin);
    t->mutable_slice()->set_end(piece.row_end);
  }
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
    return Unexpected(absl::StrCat("variable '", value.name(),
                                   "' that was not asked for"));
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

}  // namespace

PsClient::PsClient(std::shared_ptr<grpc::Channel> channel,
                   PsClientOptions options)
    : options_(std::move(options)),
      channel_(channel),
      stub_(ParameterServer::NewStub(channel)),
      push_method_name_(
          absl::StrCat("/", ParameterServer::service_full_name(), "/PushDense")),
      push_method_(push_method_name_.c_str(),
                   grpc::internal::RpcMethod::CLIENT_STREAMING, channel),
      push_unary_method_(push_method_name_.c_str(),
                         grpc::internal::RpcMethod::NORMAL_RPC, channel),
      pull_method_name_(
          absl::StrCat("/", ParameterServer::service_full_name(), "/PullDense")),
      pull_method_(pull_method_name_.c_str(),
                   grpc::internal::RpcMethod::SERVER_STREAMING, channel) {
  std::random_device random;
  next_request_id_ =
      ((uint64_t{random()} << 32) | random()) & ~(uint64_t{1} << 63);
  if (next_request_id_ == 0) next_request_id_ = 1;
}

void PsClient::FillHeader(RequestHeader* header) {
  header->set_run_id(options_.run_id);
  *header->mutable_sender() = options_.sender;
  header->set_request_id(next_request_id_++);
  header->set_generation(generation_);
}

void PsClient::FillPushHeader(RequestHeader* header) {
  FillHeader(header);
  if (step_ >= 0) header->set_step(step_);
  header->mutable_batches()->Add(batches_.begin(), batches_.end());
  header->set_owed(owed_);
}

template <typename Request, typename Response, typename Method>
absl::Status PsClient::Call(Method method, const Request& request,
                            Response* response) {
  return Retry(options_.retry, [&] {
    grpc::ClientContext context;
    SetDeadline(&context);
    return FromGrpcStatus(((*stub_).*method)(&context, request, response));
  });
}

void PsClient::SetDeadline(grpc::ClientContext* context) const {
  context->set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
}

absl::Status PsClient::CreateVariables(CreateVariablesRequest request,
                                       CreateVariablesResponse* response) {
  FillHeader(request.mutable_header());
  return Call(&ParameterServer::Stub::CreateVariables, request, response);
}

// One attempt of a dense push or pull, started on a completion queue that
// its caller polls (RunCalls): every completion whose tag is the call goes
// to Proceed, until Proceed returns false, the call over and its result
// set. A call has at most one operation pending at a time. Several calls
// share a queue, so one thread drives a push or pull to every ps task: no
// thread hand-offs, and no thread waiting for another to poll the sockets.
class PsClient::AsyncCall {
 public:
  virtual ~AsyncCall() = default;
  virtual bool Proceed(bool ok) = 0;
};

namespace {

// A completion queue, shut down and drained when it goes. Declare it before
// the calls started on it, so that they go first.
class CallQueue {
 public:
  CallQueue() = default;
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;
  ~CallQueue() {
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  grpc::CompletionQueue* get() { return &cq_; }

 private:
  grpc::CompletionQueue cq_;
};

}  // namespace

void PsClient::RunCalls(absl::Span<AsyncCall* const> calls,
                        grpc::CompletionQueue* cq) {
  size_t pending = calls.size();
  void* tag;
  bool ok;
  while (pending > 0 && cq->Next(&tag, &ok)) {
    if (!static_cast<AsyncCall*>(tag)->Proceed(ok)) --pending;
  }
}

namespace {

// A push's messages on the wire: unary when it is one message (the usual
// case: on the wire a client-streaming call of one message is a unary call,
// and as one it goes in a single batch of operations), else streamed.
class PushCall : public PsClient::AsyncCall {
 public:
  // `borrowed` lends the gradients in `messages` (see EncodePushDenseRequest).
  PushCall(grpc::ChannelInterface* channel,
           const grpc::internal::RpcMethod& unary_method,
           const grpc::internal::RpcMethod& stream_method,
           std::unique_ptr<BorrowedContent> borrowed,
           std::vector<grpc::ByteBuffer> messages, absl::Time deadline,
           grpc::CompletionQueue* cq, absl::StatusOr<PushDenseResponse>* result)
      : borrowed_(std::move(borrowed)),
        messages_(std::move(messages)),
        result_(result) {
    context_.set_deadline(absl::ToChronoTime(deadline));
    if (messages_.size() == 1) {
      unary_.reset(grpc::internal::ClientAsyncResponseReaderHelper::Create<
                   PushDenseResponse>(channel, cq, unary_method, &context_,
                                      messages_[0]));
      unary_->StartCall();
      unary_->Finish(&response_, &status_, this);
      state_ = kFinishing;
      return;
    }
    stream_.reset(grpc::internal::ClientAsyncWriterFactory<grpc::ByteBuffer>::
                      Create(channel, cq, stream_method, &context_, &response_,
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
class PullCall : public PsClient::AsyncCall {
 public:
  PullCall(grpc::ChannelInterface* channel,
           const grpc::internal::RpcMethod& method,
           const PullDenseRequest& request, absl::Span<const DensePiece> values,
           absl::Time deadline, PullDenseView* view, grpc::CompletionQueue* cq,
           absl::StatusOr<int64_t>* result)
      : values_(values),
        min_version_(request.min_version()),
        view_(view),
        result_(result) {
    for (const DensePiece& piece : values) by_name_[piece.name] = &piece;
    context_.set_deadline(absl::ToChronoTime(deadline));
    reader_.reset(grpc::internal::ClientAsyncReaderFactory<grpc::ByteBuffer>::
                      Create(channel, cq, method, &context_, request,
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
      problem_ = TakeChunk(message.values(i), message.version(),
                           view_->Content(i), view_->ContentSize(i), by_name_,
                           &received_, &versions_);
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

PushDenseRequest PsClient::NewPush(int64_t version, int64_t batch_size) {
  PushDenseRequest first;
  FillPushHeader(first.mutable_header());
  first.set_version(version);
  first.set_batch_size(batch_size);
  return first;
}

absl::StatusOr<PushDenseResponse> PsClient::PushDense(
    int64_t version, int64_t batch_size,
    absl::Span<const DensePiece> gradients) {
  return PushDense(NewPush(version, batch_size), gradients);
}

absl::StatusOr<PushDenseResponse> PsClient::PushDense(
    const PushDenseRequest& first, absl::Span<const DensePiece> gradients) {
  absl::StatusOr<PushDenseResponse> response;
  PSTRAIN_RETURN_IF_ERROR(Retry(options_.retry, [&] {
    CallQueue cq;
    std::unique_ptr<AsyncCall> call =
        StartPush(first, gradients, cq.get(), &response);
    RunCalls({call.get()}, cq.get());
    return response.status();
  }));
  return response;
}

std::unique_ptr<PsClient::AsyncCall> PsClient::StartPush(
    const PushDenseRequest& first, absl::Span<const DensePiece> gradients,
    grpc::CompletionQueue* cq, absl::StatusOr<PushDenseResponse>* result) {
  // The gradients' bytes are lent to gRPC, not copied
  // (ps/tensor_encoding.h), in messages of chunks up to max_chunk_bytes of
  // content in all. Only the first carries the request header; only the
  // last is marked last.
  auto borrowed = std::make_unique<BorrowedContent>();
  std::vector<grpc::ByteBuffer> messages;
  PushDenseRequest header = first;
  std::vector<NamedTensor> described;  // the message's chunks, sans content
  std::vector<GradientChunk> chunks;   // and their content
  int64_t room = options_.max_chunk_bytes;
  auto flush = [&] {
    for (size_t i = 0; i < chunks.size(); ++i) chunks[i].gradient = &described[i];
    messages.push_back(EncodePushDenseRequest(header, chunks, borrowed.get()));
    header.clear_header();
    described.clear();
    chunks.clear();
    room = options_.max_chunk_bytes;
  };
  for (const DensePiece& piece : gradients) {
    int64_t offset = 0;
    do {
      if (room == 0) flush();
      const int64_t n = std::min(room, piece.size - offset);
      NamedTensor& g = described.emplace_back();
      g.set_name(piece.name);
      DescribePiece(piece, g.mutable_tensor());
      g.mutable_tensor()->set_content_offset(offset);
      chunks.push_back({nullptr, piece.data + offset, n});
      offset += n;
      room -= n;
    } while (offset < piece.size);
  }
  header.set_last(true);
  flush();
  return std::make_unique<PushCall>(
      channel_.get(), push_unary_method_, push_method_, std::move(borrowed),
      std::move(messages), absl::Now() + options_.timeout, cq, result);
}

PullDenseRequest PsClient::NewPull(int64_t min_version,
                                   absl::Span<const DensePiece> values) {
  PullDenseRequest request;
  FillHeader(request.mutable_header());
  request.set_min_version(min_version);
  request.set_max_chunk_bytes(options_.max_chunk_bytes);
  for (const DensePiece& piece : values) request.add_names(piece.name);
  return request;
}

absl::StatusOr<int64_t> PsClient::PullDense(int64_t min_version,
                                            absl::Span<const DensePiece> values) {
  return PullDense(NewPull(min_version, values), values);
}

absl::StatusOr<int64_t> PsClient::PullDense(
    const PullDenseRequest& request, absl::Span<const DensePiece> values) {
  absl::StatusOr<int64_t> version;
  PSTRAIN_RETURN_IF_ERROR(Retry(options_.retry, [&] {
    CallQueue cq;
    std::unique_ptr<AsyncCall> call =
        StartPull(request, values, cq.get(), &version);
    RunCalls({call.get()}, cq.get());
    return version.status();
  }));
  return version;
}

std::unique_ptr<PsClient::AsyncCall> PsClient::StartPull(
    const PullDenseRequest& request, absl::Span<const DensePiece> values,
    grpc::CompletionQueue* cq, absl::StatusOr<int64_t>* result) {
  return std::make_unique<PullCall>(channel_.get(), pull_method_, request,
                                    values, absl::Now() + options_.timeout,
                                    &pull_view_, cq, result);
}

absl::StatusOr<PullSparseResponse> PsClient::PullSparse(
    const std::string& name, absl::Span<const int64_t> ids,
    int64_t min_version) {
  PullSparseRequest request;
  FillHeader(request.mutable_header());
  request.set_name(name);
  request.mutable_ids()->Add(ids.begin(), ids.end());
  request.set_min_version(min_version);
  PullSparseResponse response;
  PSTRAIN_RETURN_IF_ERROR(
      Call(&ParameterServer::Stub::PullSparse, request, &response));
  return response;
}

absl::StatusOr<PushSparseResponse> PsClient::PushSparse(
    const std::string& name, absl::Span<const int64_t> ids,
    absl::Span<const float> rows, int64_t width, int64_t version,
    int64_t batch_size) {
  PushSparseRequest request;
  FillPushHeader(request.mutable_header());
  request.set_name(name);
  request.mutable_ids()->Add(ids.begin(), ids.end());
  TensorProto* g = request.mutable_gradients();
  g->set_dtype(DT_FLOAT);
  g->mutable_shape()->add_dims(ids.size());
  g->mutable_shape()->add_dims(width);
  g->set_content(rows.data(), rows.size() * sizeof(float));
  request.set_version(version);
  request.set_batch_size(batch_size);
  PushSparseResponse response;
  PSTRAIN_RETURN_IF_ERROR(
      Call(&ParameterServer::Stub::PushSparse, request, &response));
  return response;
}

absl::StatusOr<SaveResponse> PsClient::Save(const std::string& directory,
                                            int64_t step) {
  SaveRequest request;
  FillHeader(request.mutable_header());
  request.set_directory(directory);
  request.set_step(step);
  SaveResponse response;
  PSTRAIN_RETURN_IF_ERROR(
      Call(&ParameterServer::Stub::Save, request, &response));
  return response;
}

absl::Status PsClient::Restore(const std::string& directory,
                               absl::Span<const SavedSlice> slices,
                               int64_t step, int64_t generation) {
  RestoreRequest request;
  request.set_generation(generation);
  FillHeader(request.mutable_header());
  request.set_directory(directory);
  request.mutable_slices()->Add(slices.begin(), slices.end());
  request.set_step(step);
  RestoreResponse response;
  return Call(&ParameterServer::Stub::Restore, request, &response);
}

absl::StatusOr<ShardStatus> PsClient::GetShardStatus() {
  GetShardStatusRequest request;
  FillHeader(request.mutable_header());
  ShardStatus status;
  PSTRAIN_RETURN_IF_ERROR(
      Call(&ParameterServer::Stub::GetShardStatus, request, &status));
  return status;
}

absl::StatusOr<ShardStatus> PsClient::ProbeShardStatus(absl::Duration timeout) {
  GetShardStatusRequest request;
  FillHeader(request.mutable_header());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ShardStatus status;
  PSTRAIN_RETURN_IF_ERROR(
      FromGrpcStatus(stub_->GetShardStatus(&context, request, &status)));
  return status;
}

absl::StatusOr<int64_t> PsClient::SetWorkers(int replicas,
                                             absl::Span<const int> absent) {
  SetWorkersRequest request;
  FillHeader(request.mutable_header());
  request.set_replicas_to_aggregate(replicas);
  request.mutable_absent_workers()->Add(absent.begin(), absent.end());
  SetWorkersResponse response;
  PSTRAIN_RETURN_IF_ERROR(
      Call(&ParameterServer::Stub::SetWorkers, request, &response));
  return response.version();
}

absl::StatusOr<int64_t> PsClusterClient::SetWorkers(
    int replicas, absl::Span<const int> absent) {
  int64_t version = -1;
  for (auto& client : clients_) {
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t v,
                             client->SetWorkers(replicas, absent));
    // A ps task holding no variables (-1) collects no step.
    if (v >= 0) version = version < 0 ? v : std::min(version, v);
  }
  return std::max<int64_t>(version, 0);
}

absl::StatusOr<std::unique_ptr<PsClusterClient>> PsClusterClient::Create(
    std::vector<std::unique_ptr<PsClient>> clients, const Placement& placement,
    absl::Span<const VariableDef> variables) {
  if (clients.empty() || placement.num_ps() != static_cast<int>(clients.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement is for ", placement.num_ps(), " ps tasks, ",
                     clients.size(), " clients given"));
  }
  std::map<std::string, VariableDef> defs;
  for (const VariableDef& def : variables) defs[def.name()] = def;
  for (const VariablePlacement& p : placement.variables()) {
    if (defs.count(p.name()) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement names unknown variable '", p.name(), "'"));
    }
  }
  return std::unique_ptr<PsClusterClient>(new PsClusterClient(
      std::move(clients), placement, std::move(defs)));
}

PsClusterClient::PsClusterClient(std::vector<std::unique_ptr<PsClient>> clients,
                                 Placement placement,
                                 std::map<std::string, VariableDef> defs)
    : clients_(std::move(clients)),
      placement_(std::move(placement)),
      defs_(std::move(defs)),
      pool_(std::max<int>(1, clients_.size() - 1)) {}

absl::Status PsClusterClient::FirstError(
    absl::Span<const absl::Status> results) {
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) {
      return WithContext(absl::StrCat("ps ", i), results[i]);
    }
  }
  return absl::OkStatus();
}

absl::Status PsClusterClient::ForEachPs(
    const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> results(clients_.size());
  absl::BlockingCounter done(clients_.size() - 1);
  for (size_t i = 1; i < clients_.size(); ++i) {
    pool_.Schedule([&, i] {
      results[i] = fn(i);
      done.DecrementCount();
    });
  }
  results[0] = fn(0);
  done.Wait();
  return FirstError(results);
}

absl::Status PsClusterClient::CreateVariables(const OptimizerConfig& optimizer,
                                              const UpdateConfig& update) {
  return ForEachPs([&](int task) {
    CreateVariablesRequest request;
    request.set_ps_task(task);
    *request.mutable_optimizer() = optimizer;
    *request.mutable_update() = update;
    for (const VariablePlacement& p : placement_.variables()) {
      ShardVariable* v = request.add_variables();
      *v->mutable_def() = defs_.at(p.name());
      *v->mutable_placement() = p;
    }
    CreateVariablesResponse response;
    return clients_[task]->CreateVariables(std::move(request), &response);
  });
}

absl::StatusOr<std::vector<std::vector<DensePiece>>> PsClusterClient::Pieces(
    const std::map<std::string, Tensor*>& tensors) const {
  std::vector<std::vector<DensePiece>> pieces(clients_.size());
  for (const VariablePlacement& p : placement_.variables()) {
    auto it = tensors.find(p.name());
    if (it == tensors.end()) continue;
    const VariableDef& def = defs_.at(p.name());
    Tensor* t = it->second;
    const std::vector<int64_t> dims(def.shape().dims().begin(),
                                    def.shape().dims().end());
    if (t->dtype() != DT_FLOAT || t->shape() != dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", p.name(), "': tensor is ", DataTypeName(t->dtype()), " ",
          ShapeString(t->shape()), ", expected float32 ", ShapeString(dims)));
    }
    const int64_t row_bytes = t->row_elements() * 4;
    for (const VariablePlacement::Slice& s : p.slices()) {
      DensePiece piece;
      piece.name = p.name();
      piece.shape = def.shape();
      piece.row_begin = s.row_begin();
      piece.row_end = s.row_end();
      piece.data = static_cast<char*>(t->raw_data()) + s.row_begin() * row_bytes;
      piece.size = (s.row_end() - s.row_begin()) * row_bytes;
      pieces[s.ps_task()].push_back(std::move(piece));
    }
  }
  return pieces;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> PsClusterClient::RouteIds(
    const std::string& name, absl::Span<const int64_t> ids,
    int64_t* width) const {
  const VariablePlacement* placement = nullptr;
  for (const VariablePlacement& p : placement_.variables()) {
    if (p.name() == name) placement = &p;
  }
  auto def = defs_.find(name);
  if (placement == nullptr || def == defs_.end() || !def->second.sparse()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not an embedding table of the run"));
  }
  *width = 1;
  for (int i = 1; i < def->second.shape().dims_size(); ++i) {
    *width *= def->second.shape().dims(i);
  }
  std::vector<std::vector<int64_t>> positions(clients_.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(const int slice, SliceForRow(*placement, ids[i]));
    positions[placement->slices(slice).ps_task()].push_back(i);
  }
  return positions;
}

absl::Status PsClusterClient::PullSparse(const std::string& name,
                                         absl::Span<const int64_t> ids,
                                         int64_t min_version, float* out) {
  int64_t width = 0;
  PSTRAIN_ASSIGN_OR_RETURN(auto positions, RouteIds(name, ids, &width));
  return ForEachPs([&](int task) -> absl::Status {
    if (positions[task].empty()) return absl::OkStatus();
    std::vector<int64_t> task_ids;
    for (int64_t p : positions[task]) task_ids.push_back(ids[p]);
    PSTRAIN_ASSIGN_OR_RETURN(
        PullSparseResponse response,
        clients_[task]->PullSparse(name, task_ids, min_version));
    // The reply lists distinct ids; map each requested id to its row.
    absl::flat_hash_map<int64_t, int> row;
    for (int i = 0; i < response.ids_size(); ++i) row[response.ids(i)] = i;
    const std::string& values = response.values().content();
    if (static_cast<int64_t>(values.size()) !=
        response.ids_size() * width * 4) {
      return absl::InternalError(absl::StrCat("ps sent ", values.size(),
                                              " bytes of rows of '", name, "'"));
    }
    for (int64_t p : positions[task]) {
      auto it = row.find(ids[p]);
      if (it == row.end()) {
        return absl::InternalError(absl::StrCat("ps did not send id ", ids[p]));
      }
      std::memcpy(out + p * width, values.data() + it->second * width * 4,
                  width * 4);
    }
    return absl::OkStatus();
  });
}

absl::Status PsClusterClient::PushSparse(const std::string& name,
                                         absl::Span<const int64_t> ids,
                                         const float* rows, int64_t version,
                                         int64_t batch_size) {
  int64_t width = 0;
  PSTRAIN_ASSIGN_OR_RETURN(auto positions, RouteIds(name, ids, &width));
  return ForEachPs([&](int task) -> absl::Status {
    if (positions[task].empty()) return absl::OkStatus();
    std::vector<int64_t> task_ids;
    std::vector<float> task_rows;
    for (int64_t p : positions[task]) {
      task_ids.push_back(ids[p]);
      task_rows.insert(task_rows.end(), rows + p * width,
                       rows + (p + 1) * width);
    }
    return clients_[task]
        ->PushSparse(name, task_ids, task_rows, width, version, batch_size)
        .status();
  });
}

template <typename Result, typename Start, typename Again>
absl::Status PsClusterClient::OnEveryPs(
    const std::vector<std::vector<DensePiece>>& pieces, Start start,
    Again again, std::vector<Result>* results) {
  {
    CallQueue cq;
    std::vector<std::unique_ptr<PsClient::AsyncCall>> calls;
    std::vector<PsClient::AsyncCall*> started;
    for (size_t task = 0; task < clients_.size(); ++task) {
      if (pieces[task].empty()) continue;
      calls.push_back(start(task, cq.get(), &(*results)[task]));
      started.push_back(calls.back().get());
    }
    PsClient::RunCalls(started, cq.get());
  }
  std::vector<absl::Status> statuses(clients_.size());
  bool unavailable = false;
  for (size_t task = 0; task < clients_.size(); ++task) {
    if (pieces[task].empty()) continue;
    statuses[task] = (*results)[task].status();
    unavailable |= absl::IsUnavailable(statuses[task]);
  }
  if (!unavailable) return FirstError(statuses);
  // Tried again as one client's call is, the tasks in parallel (the first
  // attempt of `again` is already a retry).
  return ForEachPs([&](int task) {
    if (!absl::IsUnavailable(statuses[task])) return statuses[task];
    const RetryOptions& retry = clients_[task]->options().retry;
    if (retry.on_retry) retry.on_retry();
    (*results)[task] = again(task);
    return (*results)[task].status();
  });
}

absl::Status PsClusterClient::PushDense(
    int64_t version, int64_t batch_size,
    const std::map<std::string, Tensor*>& gradients) {
  PSTRAIN_ASSIGN_OR_RETURN(auto pieces, Pieces(gradients));
  std::vector<PushDenseRequest> firsts(clients_.size());
  std::vector<absl::StatusOr<PushDenseResponse>> results(clients_.size());
  return OnEveryPs(
      pieces,
      [&](int task, grpc::CompletionQueue* cq,
          absl::StatusOr<PushDenseResponse>* result) {
        firsts[task] = clients_[task]->NewPush(version, batch_size);
        return clients_[task]->StartPush(firsts[task], pieces[task], cq,
                                         result);
      },
      // The same request id: the ps applies the push once.
      [&](int task) {
        return clients_[task]->PushDense(firsts[task], pieces[task]);
      },
      &results);
}

absl::StatusOr<int64_t> PsClusterClient::PullDense(
    int64_t min_version, const std::map<std::string, Tensor*>& values) {
  PSTRAIN_ASSIGN_OR_RETURN(auto pieces, Pieces(values));
  std::vector<PullDenseRequest> requests(clients_.size());
  std::vector<absl::StatusOr<int64_t>> results(clients_.size(), INT64_MAX);
  PSTRAIN_RETURN_IF_ERROR(OnEveryPs(
      pieces,
      [&](int task, grpc::CompletionQueue* cq,
          absl::StatusOr<int64_t>* result) {
        requests[task] = clients_[task]->NewPull(min_version, pieces[task]);
        return clients_[task]->StartPull(requests[task], pieces[task], cq,
                                         result);
      },
      [&](int task) {
        return clients_[task]->PullDense(requests[task], pieces[task]);
      },
      &results));
  int64_t lowest = INT64_MAX;
  for (const absl::StatusOr<int64_t>& version : results) {
    lowest = std::min(lowest, *version);
  }
  return lowest == INT64_MAX ? min_version : lowest;
}

}  // namespace ps
}  // namespace pstrain

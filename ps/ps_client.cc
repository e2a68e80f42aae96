#include "ps/ps_client.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "ps/sparse_call.h"
#include "ps/tensor_encoding.h"

namespace pstrain {
namespace ps {
namespace {

void DescribePiece(const DensePiece& piece, TensorProto* t) {
  t->set_dtype(DT_FLOAT);
  *t->mutable_shape() = piece.shape;
  t->clear_slice();
  if (piece.shape.dims_size() > 0) {
    t->mutable_slice()->set_begin(piece.row_begin);
    t->mutable_slice()->set_end(piece.row_end);
  }
}

// Names each piece's part in `parts`.
void AddParts(absl::Span<const DensePiece> pieces,
              google::protobuf::RepeatedPtrField<VariablePart>* parts) {
  for (const DensePiece& piece : pieces) {
    if (!piece.part.has_value()) continue;
    VariablePart* p = parts->Add();
    p->set_name(piece.name);
    p->set_dim(piece.part->dim);
    p->set_begin(piece.part->begin);
    p->set_end(piece.part->end);
  }
}

void Count(Counter* counter, int64_t bytes) {
  if (counter != nullptr) counter->Increment(bytes);
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
  const uint64_t first =
      ((uint64_t{random()} << 32) | random()) & ~(uint64_t{1} << 63);
  next_request_id_ = first == 0 ? 1 : first;
}

void PsClient::FillHeader(RequestHeader* header) {
  header->set_run_id(options_.run_id);
  *header->mutable_sender() = options_.sender;
  header->set_request_id(
      next_request_id_.fetch_add(1, std::memory_order_relaxed));
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
    std::unique_ptr<DenseCall> call =
        StartPush(first, gradients, cq.get(), &response);
    RunCalls({call.get()}, cq.get());
    return response.status();
  }));
  return response;
}

std::unique_ptr<DenseCall> PsClient::StartPush(
    const PushDenseRequest& first, absl::Span<const DensePiece> gradients,
    grpc::CompletionQueue* cq, absl::StatusOr<PushDenseResponse>* result) {
  // The gradients' bytes are lent to gRPC, not copied
  // (ps/tensor_encoding.h), in messages of chunks up to max_chunk_bytes of
  // content in all. Only the first carries the request header; only the
  // last is marked last.
  auto borrowed = std::make_unique<BorrowedContent>();
  std::vector<grpc::ByteBuffer> messages;
  PushDenseRequest header = first;
  header.clear_parts();
  AddParts(gradients, header.mutable_parts());
  std::vector<NamedTensor> described;  // the message's chunks, sans content
  std::vector<GradientChunk> chunks;   // and their content
  int64_t room = options_.max_chunk_bytes;
  auto flush = [&] {
    for (size_t i = 0; i < chunks.size(); ++i) chunks[i].gradient = &described[i];
    messages.push_back(EncodePushDenseRequest(header, chunks, borrowed.get()));
    header.clear_header();
    header.clear_parts();
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
  for (const grpc::ByteBuffer& message : messages) {
    Count(options_.bytes_sent, message.Length());
  }
  return StartPushCall({channel_.get(), cq, absl::Now() + options_.timeout},
                       push_unary_method_, push_method_, std::move(borrowed),
                       std::move(messages), result);
}

PullDenseRequest PsClient::NewPull(int64_t min_version,
                                   absl::Span<const DensePiece> values) {
  PullDenseRequest request;
  FillHeader(request.mutable_header());
  request.set_min_version(min_version);
  request.set_max_chunk_bytes(options_.max_chunk_bytes);
  for (const DensePiece& piece : values) request.add_names(piece.name);
  AddParts(values, request.mutable_parts());
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
    std::unique_ptr<DenseCall> call =
        StartPull(request, values, cq.get(), &version);
    RunCalls({call.get()}, cq.get());
    return version.status();
  }));
  return version;
}

std::unique_ptr<DenseCall> PsClient::StartPull(
    const PullDenseRequest& request, absl::Span<const DensePiece> values,
    grpc::CompletionQueue* cq, absl::StatusOr<int64_t>* result) {
  Count(options_.bytes_sent, request.ByteSizeLong());
  return StartPullCall({channel_.get(), cq, absl::Now() + options_.timeout},
                       pull_method_, request, values, &pull_view_, result,
                       options_.bytes_received);
}

absl::StatusOr<PullSparseResponse> PsClient::PullSparse(
    const std::string& name, absl::Span<const int64_t> ids, int64_t min_version,
    bool read_only) {
  return PullSparse(NewPullSparse(name, ids, min_version, read_only));
}

PullSparseRequest PsClient::NewPullSparse(const std::string& name,
                                          absl::Span<const int64_t> ids,
                                          int64_t min_version, bool read_only) {
  PullSparseRequest request;
  FillHeader(request.mutable_header());
  request.set_name(name);
  request.mutable_ids()->Add(ids.begin(), ids.end());
  request.set_min_version(min_version);
  request.set_read_only(read_only);
  return request;
}

absl::StatusOr<PullSparseResponse> PsClient::PullSparse(
    const PullSparseRequest& request) {
  PullSparseResponse response;
  PSTRAIN_RETURN_IF_ERROR(
      Call(&ParameterServer::Stub::PullSparse, request, &response));
  Count(options_.bytes_sent, request.ByteSizeLong());
  Count(options_.bytes_received, response.ByteSizeLong());
  return response;
}

std::unique_ptr<DenseCall> PsClient::StartPullSparse(
    const PullSparseRequest& request, grpc::CompletionQueue* cq,
    absl::StatusOr<PullSparseResponse>* result) {
  Count(options_.bytes_sent, request.ByteSizeLong());
  return StartPullSparseCall(stub_.get(), request,
                             absl::Now() + options_.timeout, cq, result);
}

absl::StatusOr<PushSparseResponse> PsClient::PushSparse(
    const std::string& name, absl::Span<const int64_t> ids,
    absl::Span<const float> rows, int64_t width, int64_t version,
    int64_t batch_size) {
  return PushSparse(NewPushSparse(name, ids, rows, width, version, batch_size));
}

PushSparseRequest PsClient::NewPushSparse(const std::string& name,
                                          absl::Span<const int64_t> ids,
                                          absl::Span<const float> rows,
                                          int64_t width, int64_t version,
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
  return request;
}

absl::StatusOr<PushSparseResponse> PsClient::PushSparse(
    const PushSparseRequest& request) {
  PushSparseResponse response;
  PSTRAIN_RETURN_IF_ERROR(
      Call(&ParameterServer::Stub::PushSparse, request, &response));
  Count(options_.bytes_sent, request.ByteSizeLong());
  Count(options_.bytes_received, response.ByteSizeLong());
  return response;
}

std::unique_ptr<DenseCall> PsClient::StartPushSparse(
    const PushSparseRequest& request, grpc::CompletionQueue* cq,
    absl::StatusOr<PushSparseResponse>* result) {
  Count(options_.bytes_sent, request.ByteSizeLong());
  return StartPushSparseCall(stub_.get(), request,
                             absl::Now() + options_.timeout, cq, result);
}

void PsClient::CountReceived(const google::protobuf::Message& reply) {
  Count(options_.bytes_received, reply.ByteSizeLong());
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

}  // namespace ps
}  // namespace pstrain

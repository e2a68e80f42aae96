#include "ps/ps_service.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/generic_call.h"
#include "common/grpc_options.h"
#include "common/grpc_status.h"
#include "common/health_check.h"
#include "grpcpp/alarm.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "ps/pull_reply.h"
#include "ps/tensor_encoding.h"

namespace pstrain {
namespace ps {
namespace {

constexpr char kServiceName[] = "pstrain.ParameterServer";
constexpr char kMethodPrefix[] = "/pstrain.ParameterServer/";

std::string Concat(const std::vector<grpc::Slice>& slices) {
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes;
}

// Parses `message` from the slices gRPC received it in, read in place
// (a row push's gradients are megabytes: no string of them first).
bool ParseSlices(const std::vector<grpc::Slice>& slices,
                 google::protobuf::MessageLite* message) {
  if (slices.size() == 1) {
    return message->ParseFromArray(slices[0].begin(),
                                   static_cast<int>(slices[0].size()));
  }
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  grpc::ProtoBufferReader reader(&buffer);
  return message->ParseFromZeroCopyStream(&reader);
}

// Serializes `message` straight into a slice of its size.
grpc::ByteBuffer Serialize(const google::protobuf::MessageLite& message) {
  grpc::Slice bytes(message.ByteSizeLong());
  message.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(bytes.begin()));
  return grpc::ByteBuffer(&bytes, 1);
}

grpc::Status InvalidArgument(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

// Parses the one request message of a call that is not client-streaming.
template <typename Request>
bool ParseOne(const std::vector<std::vector<grpc::Slice>>& messages,
              Request* request) {
  return messages.size() == 1 && ParseSlices(messages[0], request);
}

// Parses the request of a unary method and has the Shard answer it;
// answered(request, response) once it did.
template <typename Request, typename Response, typename Answered>
grpc::Status CallShard(Shard* shard,
                       absl::Status (Shard::*method)(const Request&, Response*),
                       const std::vector<std::vector<grpc::Slice>>& requests,
                       std::vector<grpc::ByteBuffer>* replies,
                       const Answered& answered) {
  Request request;
  if (!ParseOne(requests, &request)) {
    return InvalidArgument(
        absl::StrCat(Request::descriptor()->name(), " does not parse"));
  }
  Response response;
  const absl::Status status = (shard->*method)(request, &response);
  if (status.ok()) {
    replies->push_back(Serialize(response));
    answered(request, response);
  }
  return ToGrpcStatus(status);
}

template <typename Request>
bool WaitsForStep(const std::vector<std::vector<grpc::Slice>>& messages) {
  Request request;
  return ParseOne(messages, &request) && request.min_version() > 0;
}

// Where a call is served (see the class comment).
enum class Where { kServiceThread, kPullPool, kWorkPool };

// Pushes large enough that checking and applying them would hold the
// service thread, and health checks with it, for tens of milliseconds or
// more (a 1 GB push for a good part of a second), go to the work pool.
Where PushWhere(const std::vector<std::vector<grpc::Slice>>& messages,
                int64_t large_push_bytes) {
  int64_t bytes = 0;
  for (const std::vector<grpc::Slice>& message : messages) {
    for (const grpc::Slice& slice : message) bytes += slice.size();
  }
  return bytes >= large_push_bytes ? Where::kWorkPool : Where::kServiceThread;
}

template <typename Request>
Where PullWhere(const std::vector<std::vector<grpc::Slice>>& messages,
                int64_t) {
  return WaitsForStep<Request>(messages) ? Where::kPullPool
                                         : Where::kServiceThread;
}

template <Where kWhere>
Where Fixed(const std::vector<std::vector<grpc::Slice>>&, int64_t) {
  return kWhere;
}

}  // namespace

struct PsService::Method {
  const char* name;  // after kMethodPrefix
  // Whether the client streams its request (more than one message).
  bool streamed;
  // Whether only the chief may call it.
  bool chief_only;
  // Where a call with these request messages is served, given
  // large_push_bytes.
  Where (*where)(const Messages& requests, int64_t large_push_bytes);
  grpc::Status (PsService::*serve)(const Messages& requests, Replies* replies);
  // For a pull that `where` sends to the pull pool: whether it is served
  // at once all the same (null: never).
  bool (PsService::*ready)(const Messages& requests) = nullptr;
};

const PsService::Method PsService::kMethods[] = {
    {"CreateVariables", false, true, Fixed<Where::kWorkPool>,
     &PsService::Unary<&Shard::CreateVariables>},
    {"PullDense", false, false, PullWhere<PullDenseRequest>,
     &PsService::PullDense},
    {"PushDense", true, false, PushWhere, &PsService::PushDense},
    {"PullSparse", false, false, PullWhere<PullSparseRequest>,
     &PsService::Sparse<&Shard::PullSparse, false>, &PsService::SparseReady},
    {"PushSparse", false, false, Fixed<Where::kServiceThread>,
     &PsService::Sparse<&Shard::PushSparse, true>},
    {"Save", false, true, Fixed<Where::kWorkPool>, &PsService::Save},
    {"Restore", false, true, Fixed<Where::kWorkPool>,
     &PsService::Unary<&Shard::Restore>},
    {"GetShardStatus", false, false, Fixed<Where::kServiceThread>,
     &PsService::Unary<&Shard::GetShardStatus>},
    {"SetWorkers", false, true, Fixed<Where::kServiceThread>,
     &PsService::Unary<&Shard::SetWorkers>},
};

// One call (common/generic_call.h): its request messages (until the client
// half-closes) are served on the service thread, or on a pool thread while a
// blocking method is served.
class PsService::Call : public GenericCall {
 public:
  explicit Call(PsService* service)
      : GenericCall(&service->generic_, service->cq_.get()),
        service_(service) {}
  ~Call() override {
    if (matched()) service_->CallDone();
  }

 private:
  void Matched() override {
    service_->CallStarted();
    new Call(service_);
    Begin();
  }
  void Finishing(const grpc::Status& status) override {
    if (metrics_ != nullptr) Record(status);
  }

  // Refuses the call at once, or starts reading its request.
  void Begin() {
    absl::string_view name = context().method();
    if (name == kHealthCheckMethod) {
      health_ = true;
    } else {
      if (absl::ConsumePrefix(&name, kMethodPrefix)) {
        for (size_t i = 0; i < std::size(kMethods); ++i) {
          if (name == kMethods[i].name) {
            method_ = &kMethods[i];
            if (!service_->method_metrics_.empty()) {
              metrics_ = &service_->method_metrics_[i];
              start_ = std::chrono::steady_clock::now();
            }
          }
        }
      }
      if (method_ == nullptr) {
        Finish(grpc::Status(
            grpc::StatusCode::UNIMPLEMENTED,
            absl::StrCat("no method ", context().method(), " on a ps")));
        return;
      }
      const absl::Status admitted = service_->Admit(context(), *method_);
      if (!admitted.ok()) {
        Finish(ToGrpcStatus(admitted));
        return;
      }
    }
    ReadNext();
  }

  // Checks the message just read and reads the next.
  void Received() override {
    const std::vector<grpc::Slice>& slices = requests().back();
    if (metrics_ != nullptr) {
      for (const grpc::Slice& slice : slices)
        metrics_->received_bytes->Increment(slice.size());
    }
    if (requests().size() > 1 && (method_ == nullptr || !method_->streamed)) {
      Finish(InvalidArgument(
          absl::StrCat(context().method(), " takes one request message")));
      return;
    }
    // No complete push comes near the limit (its content is at most the
    // shard's dense bytes, its framing far less): reading on would let one
    // client fill the ps's memory. (A message of another method is bounded
    // by gRPC's limit.)
    if (method_ != nullptr && method_->streamed) {
      for (const grpc::Slice& slice : slices) request_bytes_ += slice.size();
      const int64_t limit = 2 * service_->shard_->DenseBytes() + (16 << 20);
      if (request_bytes_ > limit) {
        Finish(grpc::Status(
            grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat("push stream of more than ", limit,
                         " bytes, twice this shard's dense variables and 16 "
                         "MB; nothing of it is applied")));
        return;
      }
    }
    ReadNext();
  }

  // The request is complete: serves it, here or on the pool.
  void HalfClosed() override {
    if (unreadable()) {
      Finish(InvalidArgument("a request message could not be read"));
      return;
    }
    if (health_) {
      Finish(service_->CheckHealth(requests(), &replies()));
      return;
    }
    Where where =
        method_->where(requests(), service_->options_.large_push_bytes);
    // A pull whose step is complete waits for nothing: handing it to a
    // pool thread would cost two context switches.
    if (where == Where::kPullPool && method_->ready != nullptr &&
        (service_->*method_->ready)(requests())) {
      where = Where::kServiceThread;
    }
    if (where == Where::kServiceThread) {
      Serve();
      return;
    }
    waits_for_step_ = where == Where::kPullPool;
    ThreadPool* pool = where == Where::kPullPool ? service_->pull_pool_.get()
                                                 : service_->work_pool_.get();
    pool->Schedule([this] { Serve(); });
  }

  // Serves the request and answers it. (A member, not the pool task's own
  // body: gcc's UBSan took the member-function-pointer call in a lambda
  // capturing `this` for a member access through null.)
  void Serve() { Finish((service_->*method_->serve)(requests(), &replies())); }

  // Counts and times the call (with metrics), as it is answered.
  void Record(const grpc::Status& status) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
            .count();
    metrics_->requests->Increment();
    if (!status.ok()) metrics_->errors->Increment();
    metrics_->seconds->Observe(seconds);
    for (const grpc::ByteBuffer& reply : replies()) {
      metrics_->sent_bytes->Increment(reply.Length());
    }
    if (waits_for_step_) service_->options_.metrics->ObserveSyncWait(seconds);
  }

  PsService* const service_;
  bool health_ = false;
  const Method* method_ = nullptr;  // unless health_
  // With metrics: the method's, and when the call was matched.
  const PsMetrics::Method* metrics_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  bool waits_for_step_ = false;  // served on the pull pool
  int64_t request_bytes_ = 0;    // of a push stream so far
};

PsService::PsService(Shard* shard, PsServiceOptions options)
    : shard_(shard),
      options_(options),
      pull_pool_(std::make_unique<ThreadPool>(options.pull_threads)),
      work_pool_(std::make_unique<ThreadPool>(options.work_threads)) {
  if (options_.metrics != nullptr) {
    for (const Method& method : kMethods) {
      method_metrics_.push_back(options_.metrics->ForMethod(method.name));
    }
  }
}

PsService::~PsService() { Stop(); }

absl::Status PsService::Start(const std::string& address, int* bound_port,
                              const GrpcSecurity& security) {
  security_ = security;
  PstrainServerOptions server_options;
  server_options.register_more = [this](grpc::ServerBuilder* builder) {
    builder->RegisterAsyncGenericService(&generic_);
    cq_ = builder->AddCompletionQueue();
  };
  server_options.grpc_health = false;
  server_options.local_socket = options_.local_socket;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      StartPstrainServer(address, {}, bound_port, security, server_options);
  if (!server.ok()) return server.status();
  server_ = std::move(*server);
  new Call(this);
  thread_ = std::thread([this] { Serve(); });
  return absl::OkStatus();
}

void PsService::Serve() {
  void* tag = nullptr;
  bool ok = false;
  bool stopping = false;
  while (cq_->Next(&tag, &ok)) {
    if (tag == this) {
      // Stop's alarm: the server is shut down and every call is over; only
      // this thread adds operations to the queue, so none is added from now.
      stopping = true;
      cq_->Shutdown();
    } else if (stopping) {
      delete static_cast<GenericCall*>(tag);
    } else {
      static_cast<GenericCall*>(tag)->Proceed(ok);
    }
  }
}

void PsService::Stop() {
  if (server_ == nullptr) return;
  // Cancels what is in flight; returns once every call is over (a call
  // holds its connection, which the server waits for).
  server_->Shutdown(absl::ToChronoTime(absl::Now()));
  pull_pool_.reset();
  work_pool_.reset();
  grpc::Alarm alarm;
  alarm.Set(cq_.get(), absl::ToChronoTime(absl::Now()), this);
  thread_.join();
  server_.reset();
}

absl::Status PsService::Admit(const grpc::ServerContextBase& context,
                              const Method& method) {
  {
    absl::MutexLock lock(&mu_);
    if (refusing_) {
      return absl::UnavailableError(
          absl::StrCat("ps ", shard_->ps_task(), " is shutting down"));
    }
  }
  absl::StatusOr<Caller> caller =
      AuthenticateCaller(context, security_, options_.chief_host);
  if (!caller.ok()) return caller.status();
  if (method.chief_only && *caller != Caller::kChief) {
    return absl::PermissionDeniedError(
        absl::StrCat(method.name, " is the chief's alone"));
  }
  return absl::OkStatus();
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

template <auto kMethod>
grpc::Status PsService::Unary(const Messages& requests, Replies* replies) {
  return CallShard(shard_, kMethod, requests, replies,
                   [](const auto&, const auto&) {});
}

template <auto kMethod, bool kPush>
grpc::Status PsService::Sparse(const Messages& requests, Replies* replies) {
  PsMetrics* metrics = options_.metrics;
  return CallShard(shard_, kMethod, requests, replies,
                   [metrics](const auto& request, const auto&) {
                     if (metrics == nullptr) return;
                     if (kPush) {
                       metrics->CountPush(request.name());
                     } else {
                       metrics->CountPull(request.name());
                     }
                   });
}

bool PsService::SparseReady(const Messages& requests) {
  PullSparseRequest request;
  return ParseOne(requests, &request) &&
         shard_->SparseReady(request.name(), request.min_version());
}

grpc::Status PsService::PullDense(const Messages& requests, Replies* replies) {
  PullDenseRequest request;
  if (!ParseOne(requests, &request)) {
    return InvalidArgument("PullDenseRequest does not parse");
  }
  int64_t chunk = options_.max_chunk_bytes;
  if (request.max_chunk_bytes() > 0) {
    chunk = std::min(chunk, request.max_chunk_bytes());
  }
  PullReply reply(chunk);
  PsMetrics* metrics = options_.metrics;
  const absl::Status status = shard_->PullDense(
      request, [&reply, metrics](const DenseVariable& v, const DensePart* part,
                                 const ValueView& value) {
        reply.Add(PullHeader(v, part), value);
        if (metrics != nullptr) metrics->CountPull(v.name());
      });
  if (status.ok()) *replies = reply.Finish();
  return ToGrpcStatus(status);
}

grpc::Status PsService::PushDense(const Messages& requests, Replies* replies) {
  constexpr char kIncomplete[] =
      "push stream ended before its message marked last; nothing of it is "
      "applied";
  if (requests.empty()) return InvalidArgument(kIncomplete);
  std::vector<PushDenseView> views(requests.size());
  std::vector<const PushDenseView*> pointers;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!DecodePushDenseRequest(requests[i], &views[i])) {
      return InvalidArgument("PushDenseRequest does not parse");
    }
    // Only a stream whose last message is marked so is complete: the
    // client may have been cancelled, or gone, midway.
    if (views[i].header.last() != (i + 1 == requests.size())) {
      return InvalidArgument(
          views[i].header.last()
              ? "push stream goes on after its message marked last"
              : kIncomplete);
    }
    pointers.push_back(&views[i]);
  }
  absl::StatusOr<PushDenseResponse> result = shard_->PushDense(pointers);
  if (result.ok()) replies->push_back(Serialize(*result));
  if (options_.metrics != nullptr) {
    // A variable's chunks are consecutive: one push each.
    const std::string* last = nullptr;
    for (const PushDenseView& view : views) {
      for (const NamedTensor& gradient : view.header.gradients()) {
        if (last == nullptr || gradient.name() != *last) {
          options_.metrics->CountPush(gradient.name());
        }
        last = &gradient.name();
      }
    }
  }
  return ToGrpcStatus(result.status());
}

grpc::Status PsService::Save(const Messages& requests, Replies* replies) {
  const auto start = std::chrono::steady_clock::now();
  PsMetrics* metrics = options_.metrics;
  return CallShard(
      shard_, &Shard::Save, requests, replies,
      [metrics, start](const SaveRequest&, const SaveResponse& response) {
        if (metrics == nullptr) return;
        int64_t bytes = 0;
        for (const SavedSlice& slice : response.slices()) {
          bytes += slice.length();
        }
        metrics->ObserveSave(std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start)
                                 .count(),
                             bytes);
      });
}

grpc::Status PsService::CheckHealth(const Messages& requests,
                                    Replies* replies) {
  bool serving;
  {
    absl::MutexLock lock(&mu_);
    serving = !refusing_;
  }
  absl::StatusOr<std::string> reply =
      requests.size() == 1
          ? AnswerHealthCheck(Concat(requests[0]), kServiceName, serving)
          : absl::InvalidArgumentError("expected one HealthCheckRequest");
  if (!reply.ok()) return ToGrpcStatus(reply.status());
  grpc::Slice bytes(std::move(*reply));
  replies->emplace_back(&bytes, 1);
  return grpc::Status::OK;
}

}  // namespace ps
}  // namespace pstrain

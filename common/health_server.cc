#include "common/health_server.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_options.h"
#include "common/grpc_status.h"
#include "common/health_check.h"

namespace pstrain {
namespace {

constexpr char kExpectedOne[] = "expected one HealthCheckRequest";

}  // namespace

// One call, from gRPC's match to its status; its address is the tag of its
// one pending operation.
class HealthServer::Call {
 public:
  // Asks gRPC for the next call.
  explicit Call(HealthServer* server) : server_(server), stream_(&context_) {
    server_->generic_.RequestCall(&context_, &stream_, server_->cq_.get(),
                                  server_->cq_.get(), this);
  }

  void Proceed(bool ok) {
    switch (state_) {
      case State::kWaiting:
        if (!ok) {  // the server is shutting down
          delete this;
          return;
        }
        new Call(server_);
        if (context_.method() != kHealthCheckMethod) {
          Finish(grpc::Status(
              grpc::StatusCode::UNIMPLEMENTED,
              "this server answers only grpc.health.v1.Health/Check"));
          return;
        }
        state_ = State::kReading;
        stream_.Read(&incoming_, this);
        return;
      case State::kReading:
        if (ok) {
          // An empty message may arrive as no buffer at all.
          std::vector<grpc::Slice> slices;
          if (++messages_ > 1 ||
              (incoming_.Valid() && !incoming_.Dump(&slices).ok())) {
            Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                kExpectedOne));
            return;
          }
          for (const grpc::Slice& s : slices) {
            request_.append(reinterpret_cast<const char*>(s.begin()), s.size());
          }
          stream_.Read(&incoming_, this);
          return;
        }
        Answer();
        return;
      case State::kFinishing:
        delete this;
        return;
    }
  }

 private:
  enum class State { kWaiting, kReading, kFinishing };

  void Answer() {
    absl::StatusOr<std::string> reply =
        messages_ == 1 ? AnswerHealthCheck(request_, "", /*serving=*/true)
                       : absl::InvalidArgumentError(kExpectedOne);
    if (!reply.ok()) {
      Finish(ToGrpcStatus(reply.status()));
      return;
    }
    grpc::Slice bytes(std::move(*reply));
    reply_ = grpc::ByteBuffer(&bytes, 1);
    state_ = State::kFinishing;
    stream_.WriteAndFinish(reply_, grpc::WriteOptions(), grpc::Status::OK,
                           this);
  }

  void Finish(const grpc::Status& status) {
    state_ = State::kFinishing;
    stream_.Finish(status, this);
  }

  HealthServer* const server_;
  State state_ = State::kWaiting;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_;
  grpc::ByteBuffer incoming_;
  int messages_ = 0;
  std::string request_;
  grpc::ByteBuffer reply_;
};

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(
    const std::string& address, int* bound_port, const GrpcSecurity& security) {
  std::unique_ptr<HealthServer> health(new HealthServer);
  GrpcSecurity no_token = security;
  no_token.auth_token.clear();
  absl::StatusOr<std::unique_ptr<grpc::Server>> server = StartPstrainServer(
      address, {}, bound_port, no_token,
      [&health](grpc::ServerBuilder* builder) {
        builder->RegisterAsyncGenericService(&health->generic_);
        health->cq_ = builder->AddCompletionQueue();
      },
      /*grpc_health=*/false);
  if (!server.ok()) return server.status();
  health->server_ = std::move(*server);
  new Call(health.get());
  health->thread_ = std::thread([h = health.get()] { h->Poll(); });
  return health;
}

HealthServer::~HealthServer() {
  if (server_ == nullptr) return;  // never started
  // The thread goes on polling while the server cancels and ends its calls.
  server_->Shutdown(absl::ToChronoTime(absl::Now()));
  stop_.Notify();
  thread_.join();
  cq_->Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) delete static_cast<Call*>(tag);
}

void HealthServer::Poll() {
  // Every 20 ms, and every 1 ms while there is work: an exchange with a
  // client takes a few polls.
  absl::Duration wait = absl::Milliseconds(20);
  while (!stop_.WaitForNotificationWithTimeout(wait)) {
    wait = absl::Milliseconds(20);
    void* tag = nullptr;
    bool ok = false;
    while (cq_->AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)) ==
           grpc::CompletionQueue::GOT_EVENT) {
      static_cast<Call*>(tag)->Proceed(ok);
      wait = absl::Milliseconds(1);
    }
  }
}

}  // namespace pstrain

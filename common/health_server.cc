#include "common/health_server.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/generic_call.h"
#include "common/grpc_options.h"
#include "common/grpc_status.h"
#include "common/health_check.h"

namespace pstrain {
namespace {

constexpr char kExpectedOne[] = "expected one HealthCheckRequest";

}  // namespace

// One call: a health check is answered, anything else refused.
class HealthServer::Call : public GenericCall {
 public:
  explicit Call(HealthServer* server)
      : GenericCall(&server->generic_, server->cq_.get()), server_(server) {}

 private:
  void Matched() override {
    new Call(server_);
    if (context().method() != kHealthCheckMethod) {
      Finish(
          grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                       "this server answers only grpc.health.v1.Health/Check"));
      return;
    }
    ReadNext();
  }

  void Received() override {
    if (requests().size() > 1 || unreadable()) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, kExpectedOne));
      return;
    }
    ReadNext();
  }

  void HalfClosed() override {
    std::string request;
    if (requests().size() == 1) {
      for (const grpc::Slice& s : requests()[0]) {
        request.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    absl::StatusOr<std::string> reply =
        requests().size() == 1
            ? AnswerHealthCheck(request, "", /*serving=*/true)
            : absl::InvalidArgumentError(kExpectedOne);
    if (!reply.ok()) {
      Finish(ToGrpcStatus(reply.status()));
      return;
    }
    grpc::Slice bytes(std::move(*reply));
    replies().emplace_back(&bytes, 1);
    Finish(grpc::Status::OK);
  }

  HealthServer* const server_;
};

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(
    const std::string& address, int* bound_port, const GrpcSecurity& security) {
  std::unique_ptr<HealthServer> health(new HealthServer);
  GrpcSecurity no_token = security;
  no_token.auth_token.clear();
  PstrainServerOptions options;
  options.register_more = [&health](grpc::ServerBuilder* builder) {
    builder->RegisterAsyncGenericService(&health->generic_);
    health->cq_ = builder->AddCompletionQueue();
  };
  options.grpc_health = false;
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      StartPstrainServer(address, {}, bound_port, no_token, options);
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
  GenericCall::DeleteQueuedCalls(cq_.get());
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
      static_cast<GenericCall*>(tag)->Proceed(ok);
      wait = absl::Milliseconds(1);
    }
  }
}

}  // namespace pstrain

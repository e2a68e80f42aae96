#include "chief/chief_client.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "proto/chief_service.grpc.pb.h"

namespace pstrain {
namespace chief {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(10);

uint64_t RandomIncarnation() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

template <typename Request, typename Response, typename Method>
absl::StatusOr<Response> Call(Chief::Stub* stub, Method method,
                              const Request& request, absl::Duration timeout) {
  grpc::ClientContext context;
  // Wait for the connection (a chief still starting) rather than fail fast.
  context.set_wait_for_ready(true);
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  Response response;
  PSTRAIN_RETURN_IF_ERROR(
      FromGrpcStatus((stub->*method)(&context, request, &response)));
  return response;
}

class GrpcConnection : public ChiefConnection {
 public:
  explicit GrpcConnection(std::shared_ptr<grpc::Channel> channel)
      : stub_(Chief::NewStub(std::move(channel))) {}

  absl::StatusOr<RegisterResponse> Register(const RegisterRequest& request,
                                            absl::Duration timeout) override {
    return Call<RegisterRequest, RegisterResponse>(
        stub_.get(), &Chief::Stub::Register, request, timeout);
  }
  absl::StatusOr<HeartbeatResponse> Heartbeat(const HeartbeatRequest& request,
                                              absl::Duration timeout) override {
    return Call<HeartbeatRequest, HeartbeatResponse>(
        stub_.get(), &Chief::Stub::Heartbeat, request, timeout);
  }
  absl::StatusOr<TrainingState> GetTrainingState(
      const GetTrainingStateRequest& request, absl::Duration timeout) override {
    return Call<GetTrainingStateRequest, TrainingState>(
        stub_.get(), &Chief::Stub::GetTrainingState, request, timeout);
  }
  absl::StatusOr<ReportMetricsResponse> ReportMetrics(
      const ReportMetricsRequest& request, absl::Duration timeout) override {
    return Call<ReportMetricsRequest, ReportMetricsResponse>(
        stub_.get(), &Chief::Stub::ReportMetrics, request, timeout);
  }
  absl::StatusOr<TrainingFinishedResponse> TrainingFinished(
      const TrainingFinishedRequest& request, absl::Duration timeout) override {
    return Call<TrainingFinishedRequest, TrainingFinishedResponse>(
        stub_.get(), &Chief::Stub::TrainingFinished, request, timeout);
  }

 private:
  const std::unique_ptr<Chief::Stub> stub_;
};

}  // namespace

ChiefClient::ChiefClient(std::shared_ptr<grpc::Channel> channel, TaskRef self,
                         std::string cluster)
    : ChiefClient(std::make_unique<GrpcConnection>(std::move(channel)),
                  std::move(self), std::move(cluster)) {}

ChiefClient::ChiefClient(std::unique_ptr<ChiefConnection> connection,
                         TaskRef self, std::string cluster)
    : self_(std::move(self)),
      cluster_(std::move(cluster)),
      incarnation_(RandomIncarnation()),
      connection_(std::move(connection)) {}

void ChiefClient::FillHeader(RequestHeader* header) {
  absl::MutexLock lock(&mu_);
  header->set_run_id(run_id_);
  *header->mutable_sender() = self_;
  header->set_request_id(next_request_id_++);
  header->set_generation(generation_);
}

void ChiefClient::set_generation(int64_t generation) {
  absl::MutexLock lock(&mu_);
  generation_ = generation;
}

void ChiefClient::SetAllReduce(std::string backend, std::string dtype) {
  absl::MutexLock lock(&mu_);
  allreduce_backend_ = std::move(backend);
  allreduce_dtype_ = std::move(dtype);
}

absl::StatusOr<RegisterResponse> ChiefClient::Register(
    absl::Duration patience) {
  const absl::Time deadline = absl::Now() + patience;
  while (true) {
    RegisterRequest request;
    FillHeader(request.mutable_header());
    request.set_incarnation(incarnation_);
    request.set_cluster(cluster_);
    {
      absl::MutexLock lock(&mu_);
      request.set_allreduce_backend(allreduce_backend_);
      request.set_allreduce_dtype(allreduce_dtype_);
    }
    absl::StatusOr<RegisterResponse> response = connection_->Register(
        request, std::max(absl::Seconds(1),
                          std::min(kCallTimeout, deadline - absl::Now())));
    if (response.ok()) {
      absl::MutexLock lock(&mu_);
      run_id_ = response->run_id();
      return response;
    }
    if (!absl::IsUnavailable(response.status()) &&
        !absl::IsDeadlineExceeded(response.status())) {
      return response.status();
    }
    if (absl::Now() > deadline) return response.status();
    absl::SleepFor(absl::Milliseconds(200));
  }
}

absl::StatusOr<HeartbeatResponse> ChiefClient::Heartbeat(int64_t step) {
  HeartbeatRequest request;
  FillHeader(request.mutable_header());
  request.set_incarnation(incarnation_);
  request.set_step(step);
  return connection_->Heartbeat(request, kCallTimeout);
}

absl::StatusOr<HeartbeatResponse> ChiefClient::PublishNcclId(
    int64_t generation, const std::string& id) {
  HeartbeatRequest request;
  FillHeader(request.mutable_header());
  request.set_incarnation(incarnation_);
  request.set_step(-1);
  request.set_nccl_unique_id(id);
  request.set_nccl_generation(generation);
  return connection_->Heartbeat(request, kCallTimeout);
}

absl::StatusOr<TrainingState> ChiefClient::GetTrainingState() {
  GetTrainingStateRequest request;
  FillHeader(request.mutable_header());
  return connection_->GetTrainingState(request, kCallTimeout);
}

absl::StatusOr<ReportMetricsResponse> ChiefClient::ReportMetrics(
    const ReportMetricsRequest& metrics) {
  ReportMetricsRequest request = metrics;
  FillHeader(request.mutable_header());
  return connection_->ReportMetrics(request, kCallTimeout);
}

absl::StatusOr<TrainingFinishedResponse> ChiefClient::TrainingFinished(
    int64_t step) {
  TrainingFinishedRequest request;
  FillHeader(request.mutable_header());
  request.set_step(step);
  return connection_->TrainingFinished(request, kCallTimeout);
}

absl::StatusOr<RunPhase> ChiefClient::WaitForPhase(
    const std::function<bool(RunPhase)>& done, absl::Duration interval,
    absl::Duration patience, int64_t step) {
  absl::Time last_answer = absl::Now();
  absl::Status last_error;
  while (true) {
    absl::StatusOr<HeartbeatResponse> beat = Heartbeat(step);
    if (beat.ok()) {
      last_answer = absl::Now();
      if (done(beat->phase())) return beat->phase();
    } else {
      last_error = beat.status();
      if (absl::Now() - last_answer > patience) {
        return absl::UnavailableError(absl::StrCat(
            "chief unreachable for ", absl::FormatDuration(patience), ": ",
            last_error.message()));
      }
    }
    absl::SleepFor(interval);
  }
}

}  // namespace chief
}  // namespace pstrain

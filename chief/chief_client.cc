#include "chief/chief_client.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"

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
                              const Request& request,
                              absl::Duration timeout = kCallTimeout) {
  grpc::ClientContext context;
  // Wait for the connection (a chief still starting) rather than fail fast.
  context.set_wait_for_ready(true);
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  Response response;
  PSTRAIN_RETURN_IF_ERROR(
      FromGrpcStatus((stub->*method)(&context, request, &response)));
  return response;
}

}  // namespace

ChiefClient::ChiefClient(std::shared_ptr<grpc::Channel> channel, TaskRef self,
                         std::string cluster)
    : self_(std::move(self)),
      cluster_(std::move(cluster)),
      incarnation_(RandomIncarnation()),
      stub_(Chief::NewStub(channel)) {}

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

absl::StatusOr<RegisterResponse> ChiefClient::Register(
    absl::Duration patience) {
  const absl::Time deadline = absl::Now() + patience;
  while (true) {
    RegisterRequest request;
    FillHeader(request.mutable_header());
    request.set_incarnation(incarnation_);
    request.set_cluster(cluster_);
    absl::StatusOr<RegisterResponse> response =
        Call<RegisterRequest, RegisterResponse>(
            stub_.get(), &Chief::Stub::Register, request,
            std::max(absl::Seconds(1),
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
  return Call<HeartbeatRequest, HeartbeatResponse>(
      stub_.get(), &Chief::Stub::Heartbeat, request);
}

absl::StatusOr<TrainingState> ChiefClient::GetTrainingState() {
  GetTrainingStateRequest request;
  FillHeader(request.mutable_header());
  return Call<GetTrainingStateRequest, TrainingState>(
      stub_.get(), &Chief::Stub::GetTrainingState, request);
}

absl::StatusOr<ReportMetricsResponse> ChiefClient::ReportMetrics(
    const ReportMetricsRequest& metrics) {
  ReportMetricsRequest request = metrics;
  FillHeader(request.mutable_header());
  return Call<ReportMetricsRequest, ReportMetricsResponse>(
      stub_.get(), &Chief::Stub::ReportMetrics, request);
}

absl::StatusOr<TrainingFinishedResponse> ChiefClient::TrainingFinished(
    int64_t step) {
  TrainingFinishedRequest request;
  FillHeader(request.mutable_header());
  request.set_step(step);
  return Call<TrainingFinishedRequest, TrainingFinishedResponse>(
      stub_.get(), &Chief::Stub::TrainingFinished, request);
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

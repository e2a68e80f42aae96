#include "chief/chief_service.h"

#include <utility>

#include "common/grpc_security.h"
#include "common/grpc_status.h"

namespace pstrain {
namespace chief {
namespace {

// Finishes a unary call with `handle()`'s value (copied into `response`) or
// its error; a caller without the token gets UNAUTHENTICATED, and handle()
// does not run.
template <typename T, typename Handle>
grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context,
                                const std::string& auth_token, Handle handle,
                                T* response) {
  absl::Status auth = CheckAuthToken(*context, auth_token);
  absl::StatusOr<T> result = auth.ok() ? handle() : absl::StatusOr<T>(auth);
  if (result.ok()) *response = *std::move(result);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* ChiefService::Register(
    grpc::CallbackServerContext* context, const RegisterRequest* request,
    RegisterResponse* response) {
  return Reply(
      context, auth_token_, [&] { return state_->Register(*request); },
      response);
}

grpc::ServerUnaryReactor* ChiefService::Heartbeat(
    grpc::CallbackServerContext* context, const HeartbeatRequest* request,
    HeartbeatResponse* response) {
  return Reply(
      context, auth_token_, [&] { return state_->Heartbeat(*request); },
      response);
}

grpc::ServerUnaryReactor* ChiefService::GetTrainingState(
    grpc::CallbackServerContext* context,
    const GetTrainingStateRequest* request, TrainingState* response) {
  return Reply(
      context, auth_token_, [&] { return state_->GetTrainingState(*request); },
      response);
}

grpc::ServerUnaryReactor* ChiefService::ReportMetrics(
    grpc::CallbackServerContext* context, const ReportMetricsRequest* request,
    ReportMetricsResponse* response) {
  return Reply(
      context, auth_token_, [&] { return state_->ReportMetrics(*request); },
      response);
}

grpc::ServerUnaryReactor* ChiefService::TrainingFinished(
    grpc::CallbackServerContext* context,
    const TrainingFinishedRequest* request,
    TrainingFinishedResponse* response) {
  return Reply(
      context, auth_token_, [&] { return state_->TrainingFinished(*request); },
      response);
}

}  // namespace chief
}  // namespace pstrain

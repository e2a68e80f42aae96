#include "chief/chief_service.h"

#include <utility>

#include "common/grpc_status.h"

namespace pstrain {
namespace chief {
namespace {

// Finishes a unary call with `result`'s value (copied into `response`) or
// its error.
template <typename T>
grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context,
                                absl::StatusOr<T> result, T* response) {
  if (result.ok()) *response = *std::move(result);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* ChiefService::Register(
    grpc::CallbackServerContext* context, const RegisterRequest* request,
    RegisterResponse* response) {
  return Reply(context, state_->Register(*request), response);
}

grpc::ServerUnaryReactor* ChiefService::Heartbeat(
    grpc::CallbackServerContext* context, const HeartbeatRequest* request,
    HeartbeatResponse* response) {
  return Reply(context, state_->Heartbeat(*request), response);
}

grpc::ServerUnaryReactor* ChiefService::GetTrainingState(
    grpc::CallbackServerContext* context,
    const GetTrainingStateRequest* request, TrainingState* response) {
  return Reply(context, state_->GetTrainingState(*request), response);
}

grpc::ServerUnaryReactor* ChiefService::ReportMetrics(
    grpc::CallbackServerContext* context, const ReportMetricsRequest* request,
    ReportMetricsResponse* response) {
  return Reply(context, state_->ReportMetrics(*request), response);
}

grpc::ServerUnaryReactor* ChiefService::TrainingFinished(
    grpc::CallbackServerContext* context,
    const TrainingFinishedRequest* request,
    TrainingFinishedResponse* response) {
  return Reply(context, state_->TrainingFinished(*request), response);
}

}  // namespace chief
}  // namespace pstrain

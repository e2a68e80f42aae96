// The gRPC face of the chief: Chief's callback service over a RunState.
#ifndef PSTRAIN_CHIEF_CHIEF_SERVICE_H_
#define PSTRAIN_CHIEF_CHIEF_SERVICE_H_

#include <string>
#include <utility>

#include "chief/run_state.h"
#include "proto/chief_service.grpc.pb.h"

namespace pstrain {
namespace chief {

class ChiefService final : public Chief::CallbackService {
 public:
  // `state` must outlive the service. With an `auth_token`, every call must
  // carry it (CheckAuthToken) or is refused with UNAUTHENTICATED before it
  // reaches `state`.
  explicit ChiefService(RunState* state, std::string auth_token = "")
      : state_(state), auth_token_(std::move(auth_token)) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const RegisterRequest* request,
                                     RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const HeartbeatRequest* request,
                                      HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* GetTrainingState(
      grpc::CallbackServerContext* context,
      const GetTrainingStateRequest* request, TrainingState* response) override;
  grpc::ServerUnaryReactor* ReportMetrics(
      grpc::CallbackServerContext* context,
      const ReportMetricsRequest* request,
      ReportMetricsResponse* response) override;
  grpc::ServerUnaryReactor* TrainingFinished(
      grpc::CallbackServerContext* context,
      const TrainingFinishedRequest* request,
      TrainingFinishedResponse* response) override;

 private:
  RunState* const state_;
  const std::string auth_token_;
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHIEF_SERVICE_H_

// The client ps tasks and workers use to talk to the chief: register (retried
// while the chief is not up yet), heartbeat, report metrics, finish.
//
//   ChiefClient chief(CreatePstrainChannel(address), MakeTask(JOB_WORKER, 1));
//   PSTRAIN_ASSIGN_OR_RETURN(RegisterResponse run,
//                            chief.Register(absl::Minutes(5)));
//   ... chief.Heartbeat(step) ...
//
// Thread-safe. The requests travel over a ChiefConnection (gRPC, or an
// in-process chief in tests).
#ifndef PSTRAIN_CHIEF_CHIEF_CLIENT_H_
#define PSTRAIN_CHIEF_CHIEF_CLIENT_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "chief/chief_connection.h"
#include "grpcpp/grpcpp.h"
#include "proto/chief_service.pb.h"

namespace pstrain {
namespace chief {

class ChiefClient {
 public:
  // `cluster`: the caller's TF_CONFIG cluster (ClusterSpec::ToString()),
  // sent when registering so the chief can refuse another cluster's task.
  ChiefClient(std::shared_ptr<grpc::Channel> channel, TaskRef self,
              std::string cluster = "");
  ChiefClient(std::unique_ptr<ChiefConnection> connection, TaskRef self,
              std::string cluster = "");

  // Registers, retrying UNAVAILABLE (the chief not up yet) until `patience`
  // runs out. Remembers the run id for the calls below.
  absl::StatusOr<RegisterResponse> Register(absl::Duration patience);

  absl::StatusOr<HeartbeatResponse> Heartbeat(int64_t step);
  // Worker 0 of a GPU collective run: a heartbeat (of no step) that
  // publishes the ncclUniqueId `id` of `generation`'s communicator
  // (HeartbeatRequest.nccl_unique_id).
  absl::StatusOr<HeartbeatResponse> PublishNcclId(int64_t generation,
                                                  const std::string& id);
  absl::StatusOr<TrainingState> GetTrainingState();
  absl::StatusOr<ReportMetricsResponse> ReportMetrics(
      const ReportMetricsRequest& metrics);
  absl::StatusOr<TrainingFinishedResponse> TrainingFinished(int64_t step);

  // Heartbeats every `interval` until the chief reports a phase in which
  // `done(phase)` is true, or `patience` passes without an answer; returns
  // the last phase seen (UNAVAILABLE if the chief could not be reached).
  absl::StatusOr<RunPhase> WaitForPhase(
      const std::function<bool(RunPhase)>& done, absl::Duration interval,
      absl::Duration patience, int64_t step = 0);

  uint64_t incarnation() const { return incarnation_; }

  // The recovery generation put in every request from now on
  // (RequestHeader.generation).
  void set_generation(int64_t generation) ABSL_LOCKS_EXCLUDED(mu_);

  // Collective runs: the all-reduce backend ("ring", "nccl") and dtype
  // ("float32", "bf16") this worker chose, sent in every Register from now
  // on (RegisterRequest.allreduce_backend), so that the chief, or one
  // started again, refuses a worker that differs from the others.
  void SetAllReduce(std::string backend, std::string dtype)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void FillHeader(RequestHeader* header) ABSL_LOCKS_EXCLUDED(mu_);

  const TaskRef self_;
  const std::string cluster_;
  const uint64_t incarnation_;
  const std::unique_ptr<ChiefConnection> connection_;
  std::atomic<uint64_t> next_request_id_{1};
  absl::Mutex mu_;
  std::string run_id_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::string allreduce_backend_ ABSL_GUARDED_BY(mu_);
  std::string allreduce_dtype_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chief
}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_CHIEF_CLIENT_H_

// A server that answers only gRPC's standard health check, for a process
// that serves nothing else (a worker): Kubernetes' probes, and whoever
// checks that the process is up. Every other call gets UNIMPLEMENTED.
//
// Its thread never waits on its completion queue: it polls it without
// waiting, every few milliseconds. A thread waiting on a completion queue
// is one of the process's pollers, and with two of them gRPC hands polling
// from one to the other on every socket event, a context switch each time
// (ps/ps_service.h). In a worker, whose pushes and pulls are polled by the
// thread that makes them, gRPC's health service (two such threads) cost
// bench/ps_throughput about a fifth of its throughput. A health check on a
// new connection takes a few polls, well under Kubernetes' 1 s probe
// timeout.
#ifndef PSTRAIN_COMMON_HEALTH_SERVER_H_
#define PSTRAIN_COMMON_HEALTH_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/grpc_security.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"

namespace pstrain {

class HealthServer {
 public:
  // Serves at `address` ("host:port"; port 0 picks one, set in *bound_port)
  // behind `security`'s TLS (no token: probes carry none).
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(
      const std::string& address, int* bound_port,
      const GrpcSecurity& security = GrpcSecurity());
  // Stops serving.
  ~HealthServer();

 private:
  class Call;
  HealthServer() = default;
  void Poll();

  grpc::AsyncGenericService generic_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::unique_ptr<grpc::Server> server_;  // destroyed before the queue
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_HEALTH_SERVER_H_

// The gRPC face of a Shard: serves the ParameterServer service, and gRPC's
// standard health check, at one address. It decodes requests, calls the
// Shard, and encodes replies; all decisions are the Shard's.
//
// One thread serves every call. The service uses gRPC's async generic API:
// the thread polls one completion queue, which also makes it the one thread
// of the process that reads and writes the sockets (gRPC hands socket events
// to whichever thread polls; with more pollers, each event passes the role
// to another thread, a context switch). Against gRPC's callback API, whose
// two polling threads hand each other every event, this raised
// bench/ps_throughput's 4 MB figures by about a third. gRPC's own health
// service would bring those threads back (it is a callback service), so the
// health check is answered here.
//
// Calls that may block, or take long, are served on two pools of threads of
// their own. Pulls that may wait for a sync step (min_version > 0) have one
// (pull_threads); the work that ends such a wait never queues behind them:
// pushes of large_push_bytes or more, CreateVariables (initialization),
// Save and Restore (file I/O) have the other (work_threads), whose calls
// wait for nothing but locks and disks. The others, most pushes and the
// pulls of async runs among them, are served on the service thread: they
// wait only on the variables' locks. So is a sparse pull whose step is
// complete when it arrives (the usual case: a worker pulls its rows after
// its dense variables): a pool thread would cost two context switches.
//
// CreateVariables, Save, Restore and SetWorkers are the chief's alone: with
// a chief token (GrpcSecurity::chief_token) they need it, with mutual TLS a
// client certificate naming the chief's host (chief_host); other callers
// get PERMISSION_DENIED. Without security (tests, benchmarks) anyone may.
//
// Pulls are streamed in messages of at most max_chunk_bytes of content
// (request's value, else the default), so no message approaches protobuf's
// 2 GB limit; small variables share a message. Pull replies are encoded and
// push requests decoded by hand (ps/tensor_encoding.h), saving a copy of
// every chunk: the Shard reads the gradients from gRPC's buffers, and gRPC
// sends a lent value from the variable. On the wire they are ordinary
// PullDenseResponse and PushDenseRequest messages.
#ifndef PSTRAIN_PS_PS_SERVICE_H_
#define PSTRAIN_PS_PS_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/grpc_security.h"
#include "common/thread_pool.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "ps/ps_metrics.h"
#include "ps/shard.h"

namespace pstrain {
namespace ps {

struct PsServiceOptions {
  // Largest tensor content per pull message unless the request asks less.
  int64_t max_chunk_bytes = 4 << 20;
  // Threads serving pulls that may wait for a sync step. >= 1.
  int pull_threads = 16;
  // Threads serving large pushes, CreateVariables, Save and Restore. >= 1.
  int work_threads = 4;
  // Pushes of this many bytes or more are applied on the work pool (they
  // would hold the service thread, and health checks, for tens of ms).
  int64_t large_push_bytes = 64 << 20;
  // The chief's host in TF_CONFIG: with mutual TLS, chief-only calls need a
  // client certificate naming it ("" : not checked).
  std::string chief_host;
  // Where requests are counted and timed (null: nowhere). Must outlive the
  // service.
  PsMetrics* metrics = nullptr;
  // Whether same-host clients may reach it over a local socket
  // (common/grpc_options.h: PstrainServerOptions::local_socket).
  bool local_socket = true;
};

class PsService {
 public:
  // `shard` must outlive the service.
  PsService(Shard* shard, PsServiceOptions options);
  // Stops serving if it still does.
  ~PsService();
  PsService(const PsService&) = delete;
  PsService& operator=(const PsService&) = delete;

  // Serves at `address` ("host:port"; port 0 picks one) behind `security`
  // (common/grpc_options.h: StartPstrainServer; every call but the health
  // check must carry its auth token). Sets *bound_port. Called at most once.
  absl::Status Start(const std::string& address, int* bound_port,
                     const GrpcSecurity& security = GrpcSecurity());

  // Shutting down: every call from now on is refused with UNAVAILABLE
  // (clients try again, another ps or later), the health check answers
  // NOT_SERVING, and WaitUntilIdle waits for the calls in flight.
  void RefuseNewCalls() ABSL_LOCKS_EXCLUDED(mu_);
  // True once no call is in flight, false at `deadline`.
  bool WaitUntilIdle(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // Shuts the server down at once, cancelling the calls still in flight, and
  // returns once its threads are done. Pulls waiting for a sync step must be
  // ended first (Shard::InterruptPulls). gRPC's Server::Shutdown with a
  // deadline would also wait for every connection a client keeps open, so
  // a ps stops by RefuseNewCalls, WaitUntilIdle, then Stop.
  void Stop();

 private:
  class Call;
  struct Method;
  using Messages = std::vector<std::vector<grpc::Slice>>;
  using Replies = std::vector<grpc::ByteBuffer>;

  // The service thread: serves the completion queue until it is shut down.
  void Serve();
  // OK unless the call of `method` must be refused: shutting down, not
  // carrying an auth token, or a chief-only method from another caller.
  absl::Status Admit(const grpc::ServerContextBase& context,
                     const Method& method) ABSL_LOCKS_EXCLUDED(mu_);
  void CallStarted() ABSL_LOCKS_EXCLUDED(mu_);
  void CallDone() ABSL_LOCKS_EXCLUDED(mu_);

  // The methods: each reads its request messages and sets its replies.
  // Unary<&Shard::M> serves a unary method M.
  template <auto kMethod>
  grpc::Status Unary(const Messages& requests, Replies* replies);
  // Sparse<&Shard::PullSparse, false> and <&Shard::PushSparse, true>: as
  // Unary, counting the table's pulls or pushes (with metrics).
  template <auto kMethod, bool kPush>
  grpc::Status Sparse(const Messages& requests, Replies* replies);
  // Whether a sparse pull's table reached the version it waits for.
  bool SparseReady(const Messages& requests);
  grpc::Status PullDense(const Messages& requests, Replies* replies);
  grpc::Status PushDense(const Messages& requests, Replies* replies);
  grpc::Status Save(const Messages& requests, Replies* replies);
  grpc::Status CheckHealth(const Messages& requests, Replies* replies)
      ABSL_LOCKS_EXCLUDED(mu_);

  static const Method kMethods[];

  Shard* const shard_;
  const PsServiceOptions options_;
  GrpcSecurity security_;
  // With options_.metrics: those of kMethods[i], by i.
  std::vector<PsMetrics::Method> method_metrics_;

  absl::Mutex mu_;
  bool refusing_ ABSL_GUARDED_BY(mu_) = false;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;  // in flight

  grpc::AsyncGenericService generic_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::unique_ptr<grpc::Server> server_;  // destroyed before the queue
  std::thread thread_;
  std::unique_ptr<ThreadPool> pull_pool_;
  std::unique_ptr<ThreadPool> work_pool_;
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_PS_SERVICE_H_

// The gRPC face of a Shard: ParameterServer's callback service. It decodes
// requests, calls the Shard, and encodes replies; all decisions are the
// Shard's.
//
// Pulls that may wait (min_version > 0), saves and restores run on a thread
// pool of the service's own: a sync pull may wait for its step, a save or
// restore does file I/O, and gRPC's callback threads must not block. A pull
// with min_version 0 never waits for a step and is served inline.
// Pulls are streamed in messages of at most max_chunk_bytes of content
// (request's value, else the default), so no message approaches protobuf's
// 2 GB limit; small variables share a message. Push stream messages are
// decoded in place: the Shard reads the gradients from gRPC's buffers.
#ifndef PSTRAIN_PS_PS_SERVICE_H_
#define PSTRAIN_PS_PS_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/thread_pool.h"
#include "proto/ps_service.grpc.pb.h"
#include "ps/shard.h"

namespace pstrain {
namespace ps {

struct PsServiceOptions {
  // Largest tensor content per pull message unless the request asks less.
  int64_t max_chunk_bytes = 4 << 20;
  // Threads serving pulls (each may wait for a sync step).
  int pull_threads = 16;
  // When set, every call must carry it (common/grpc_security.h) or is
  // refused with UNAUTHENTICATED before it reaches the Shard.
  std::string auth_token;
};

// PullDense and PushDense are raw methods: pull replies are encoded and
// push requests decoded by hand (ps/tensor_encoding.h), to save a copy of
// every chunk; on the wire they are ordinary PullDenseResponse and
// PushDenseRequest messages.
class PsService final
    : public ParameterServer::WithRawCallbackMethod_PullDense<
          ParameterServer::WithRawCallbackMethod_PushDense<
              ParameterServer::CallbackService>> {
 public:
  // `shard` must outlive the service.
  PsService(Shard* shard, PsServiceOptions options);
  ~PsService() override;

  grpc::ServerUnaryReactor* CreateVariables(
      grpc::CallbackServerContext* context,
      const CreateVariablesRequest* request,
      CreateVariablesResponse* response) override;
  // `request` is a serialized PullDenseRequest.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* PullDense(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  // `response` receives a serialized PushDenseResponse.
  grpc::ServerReadReactor<grpc::ByteBuffer>* PushDense(
      grpc::CallbackServerContext* context,
      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PullSparse(grpc::CallbackServerContext* context,
                                       const PullSparseRequest* request,
                                       PullSparseResponse* response) override;
  grpc::ServerUnaryReactor* PushSparse(grpc::CallbackServerContext* context,
                                       const PushSparseRequest* request,
                                       PushSparseResponse* response) override;
  grpc::ServerUnaryReactor* Save(grpc::CallbackServerContext* context,
                                 const SaveRequest* request,
                                 SaveResponse* response) override;
  grpc::ServerUnaryReactor* Restore(grpc::CallbackServerContext* context,
                                    const RestoreRequest* request,
                                    RestoreResponse* response) override;
  grpc::ServerUnaryReactor* GetShardStatus(
      grpc::CallbackServerContext* context,
      const GetShardStatusRequest* request, ShardStatus* response) override;
  grpc::ServerUnaryReactor* SetWorkers(grpc::CallbackServerContext* context,
                                       const SetWorkersRequest* request,
                                       SetWorkersResponse* response) override;

  // Shutting down: every call from now on is refused with UNAVAILABLE
  // (clients try again, another ps or later), and WaitUntilIdle waits for
  // the calls in flight. gRPC's Server::Shutdown would also wait for them,
  // but then for every connection a client keeps open too, up to its
  // deadline: once idle, the server can be shut down at once.
  void RefuseNewCalls() ABSL_LOCKS_EXCLUDED(mu_);
  // True once no call is in flight, false at `deadline`.
  bool WaitUntilIdle(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // For the calls' reactors: one starts, one is done (its status sent).
  void CallStarted() ABSL_LOCKS_EXCLUDED(mu_);
  void CallDone() ABSL_LOCKS_EXCLUDED(mu_);

  Shard* shard() const { return shard_; }
  const PsServiceOptions& options() const { return options_; }
  ThreadPool* pull_pool() { return &pull_pool_; }

 private:
  // OK unless the call must be refused: shutting down, or not carrying the
  // auth token.
  absl::Status Admit(const grpc::CallbackServerContext& context)
      ABSL_LOCKS_EXCLUDED(mu_);

  Shard* const shard_;
  const PsServiceOptions options_;

  absl::Mutex mu_;
  bool refusing_ ABSL_GUARDED_BY(mu_) = false;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;  // in flight

  // Last member: destroyed (drained and joined) first.
  ThreadPool pull_pool_;
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_PS_SERVICE_H_

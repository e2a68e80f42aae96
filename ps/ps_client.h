// Clients of the parameter servers, as workers, the chief, tests and
// benchmarks use them.
//
// PsClient talks to one ps task: it fills the request header (run id,
// sender, request id), splits dense tensors into chunks of at most
// max_chunk_bytes, and reassembles pulled chunks straight into the caller's
// buffers. PsClusterClient routes whole variables to every ps task through
// the run's Placement (or, for a tensor-parallel member, its part of a split
// variable: HoldParts), in parallel: dense pushes and pulls from the calling
// thread, driving one call per ps task (gRPC's async API); sparse ones and
// the rest on a thread per ps task.
//
//   PsClusterClient ps(clients, placement, defs);
//   PSTRAIN_ASSIGN_OR_RETURN(int64_t version, ps.PullDense(step, &weights));
//   ... compute gradient sums ...
//   PSTRAIN_RETURN_IF_ERROR(ps.PushDense(version, batch_size, gradients));
//
// Neither class is thread-safe: one caller at a time (they reuse buffers),
// except that a PsClient's sparse calls (PullSparse, PushSparse, their
// New* and Start* forms, CountReceived) may run on one thread while its
// other calls run on another (request ids are atomic; the reused buffers
// are the dense calls'), as a worker's trainer does; set_generation and
// set_step only between calls.
// PsClient is in ps_client.cc, PsClusterClient in ps_cluster_client.cc, the
// completion-queue calls both drive in ps/dense_call.h.
#ifndef PSTRAIN_PS_PS_CLIENT_H_
#define PSTRAIN_PS_PS_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/metrics.h"
#include "common/retry.h"
#include "common/tensor.h"
#include "common/thread_pool.h"
#include "grpcpp/grpcpp.h"
#include "proto/ps_service.grpc.pb.h"
#include "ps/dense_call.h"
#include "ps/tensor_encoding.h"
#include "ps/variable_store.h"

namespace pstrain {
namespace ps {

struct PsClientOptions {
  std::string run_id;
  TaskRef sender;
  int64_t max_chunk_bytes = 4 << 20;
  // Deadline of each call (a sync pull waits within it).
  absl::Duration timeout = absl::Seconds(120);
  // Calls failing with UNAVAILABLE (the ps restarting, a link down for a
  // moment) are tried again within this; a retried push keeps its request
  // id, so the ps applies it once.
  RetryOptions retry;
  // When set (and outliving the client): the serialized bytes of the
  // messages of dense and sparse pushes and pulls that the client sends,
  // and those it receives (a dense call's at every attempt, a sparse call's
  // once it succeeds), except a dense push's short reply; gRPC's framing is
  // not counted. What a worker moves per step (its Prometheus metrics).
  Counter* bytes_sent = nullptr;
  Counter* bytes_received = nullptr;
};

class PsClient {
 public:
  PsClient(std::shared_ptr<grpc::Channel> channel, PsClientOptions options);

  absl::Status CreateVariables(CreateVariablesRequest request,
                               CreateVariablesResponse* response);

  // Pushes gradient sums over `batch_size` examples computed from `version`.
  absl::StatusOr<PushDenseResponse> PushDense(
      int64_t version, int64_t batch_size,
      absl::Span<const DensePiece> gradients);
  // The same, from its first message (NewPush): tried again with the same
  // request id.
  absl::StatusOr<PushDenseResponse> PushDense(
      const PushDenseRequest& first, absl::Span<const DensePiece> gradients);
  // A push's first message: header (a new request id), version, batch size.
  PushDenseRequest NewPush(int64_t version, int64_t batch_size);

  // Pulls every piece into its data, after the ps reached `min_version`.
  // Returns the lowest version read (each variable has its own). INTERNAL if
  // the ps sends something that does not fit the pieces (unknown name, wrong
  // size, one variable's chunks from two versions).
  absl::StatusOr<int64_t> PullDense(int64_t min_version,
                                    absl::Span<const DensePiece> values);
  // The same, from its request (NewPull).
  absl::StatusOr<int64_t> PullDense(const PullDenseRequest& request,
                                    absl::Span<const DensePiece> values);
  PullDenseRequest NewPull(int64_t min_version,
                           absl::Span<const DensePiece> values);

  // One attempt of a push or pull, started on `cq` (which must outlive it)
  // and driven by RunCalls (ps/dense_call.h); its outcome goes to *result.
  // The pieces must outlive it. PsClusterClient drives one per ps task from
  // one thread.
  std::unique_ptr<DenseCall> StartPush(
      const PushDenseRequest& first, absl::Span<const DensePiece> gradients,
      grpc::CompletionQueue* cq, absl::StatusOr<PushDenseResponse>* result);
  std::unique_ptr<DenseCall> StartPull(const PullDenseRequest& request,
                                       absl::Span<const DensePiece> values,
                                       grpc::CompletionQueue* cq,
                                       absl::StatusOr<int64_t>* result);

  // Rows of embedding table `name` for `ids` (duplicates allowed), after
  // the table reached `min_version`; with `read_only`, missing rows are
  // not created (PullSparseRequest.read_only).
  absl::StatusOr<PullSparseResponse> PullSparse(const std::string& name,
                                                absl::Span<const int64_t> ids,
                                                int64_t min_version,
                                                bool read_only = false);
  // The same, from its request (NewPullSparse).
  absl::StatusOr<PullSparseResponse> PullSparse(
      const PullSparseRequest& request);
  PullSparseRequest NewPullSparse(const std::string& name,
                                  absl::Span<const int64_t> ids,
                                  int64_t min_version, bool read_only = false);

  // Row gradient sums `rows` ([ids.size(), width] floats) for `ids`.
  absl::StatusOr<PushSparseResponse> PushSparse(
      const std::string& name, absl::Span<const int64_t> ids,
      absl::Span<const float> rows, int64_t width, int64_t version,
      int64_t batch_size);
  // The same, from its request (NewPushSparse): tried again with the same
  // request id.
  absl::StatusOr<PushSparseResponse> PushSparse(
      const PushSparseRequest& request);
  // A sparse push's request (a new request id); `rows` are copied into it.
  PushSparseRequest NewPushSparse(const std::string& name,
                                  absl::Span<const int64_t> ids,
                                  absl::Span<const float> rows, int64_t width,
                                  int64_t version, int64_t batch_size);

  // One attempt of a sparse pull or push, started on `cq` (which must
  // outlive it) and driven by RunCalls (ps/sparse_call.h); its outcome goes
  // to *result. SparseTables drives one per ps task and table from one
  // thread, and tries those whose ps was unavailable again with PullSparse
  // or PushSparse of the same request.
  std::unique_ptr<DenseCall> StartPullSparse(
      const PullSparseRequest& request, grpc::CompletionQueue* cq,
      absl::StatusOr<PullSparseResponse>* result);
  std::unique_ptr<DenseCall> StartPushSparse(
      const PushSparseRequest& request, grpc::CompletionQueue* cq,
      absl::StatusOr<PushSparseResponse>* result);
  // Counts a started call's reply once it has come (options' bytes_received:
  // the started calls' replies arrive where their driver sees them).
  void CountReceived(const google::protobuf::Message& reply);

  absl::StatusOr<ShardStatus> GetShardStatus();
  // One GetShardStatus attempt within `timeout`, not retried: whether the
  // ps answers now, and what it holds.
  absl::StatusOr<ShardStatus> ProbeShardStatus(absl::Duration timeout);

  // Sync: steps wait for `replicas` gradients, and pushes of the `absent`
  // workers are refused. Returns the ps's lowest variable version (-1 if
  // it holds none).
  absl::StatusOr<int64_t> SetWorkers(int replicas, absl::Span<const int> absent);

  // Has the ps write its shard into `directory` at `step`.
  absl::StatusOr<SaveResponse> Save(const std::string& directory, int64_t step);

  // Has the ps replace its shard with its parts of `slices` in `directory`
  // and serve recovery generation `generation` from then on.
  absl::Status Restore(const std::string& directory,
                       absl::Span<const SavedSlice> slices, int64_t step,
                       int64_t generation);

  const PsClientOptions& options() const { return options_; }

  // The recovery generation put in every request from now on
  // (RequestHeader.generation).
  void set_generation(int64_t generation) { generation_ = generation; }
  // The worker's training step (< 0: none) and the global batches its
  // gradient sums over, put in every push from now on (RequestHeader.step
  // and .batches): an async ps applies a step's push once. `owed`: the
  // batches are absent workers' that the ps tasks may hold already
  // (RequestHeader.owed).
  void set_step(int64_t step, std::vector<int64_t> batches, bool owed = false) {
    step_ = step;
    batches_ = std::move(batches);
    owed_ = owed;
  }

 private:
  void FillHeader(RequestHeader* header);
  // FillHeader, and the step and batches of a push.
  void FillPushHeader(RequestHeader* header);
  void SetDeadline(grpc::ClientContext* context) const;
  // One attempt of a call of stub_ with a fresh context.
  template <typename Request, typename Response, typename Method>
  absl::Status Call(Method method, const Request& request, Response* response);

  const PsClientOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<ParameterServer::Stub> stub_;
  // PushDense and PullDense as methods whose PushDenseRequest and
  // PullDenseResponse messages we serialize and parse ourselves
  // (ps/tensor_encoding.h): what the generated stub does, with
  // grpc::ByteBuffer as the message type. Other methods use stub_.
  // grpc::internal::RpcMethod and the async factories are what generated
  // stubs are built on; gRPC 1.51 has no public generic streaming call of
  // either kind. pstrain builds against Debian's pinned gRPC, so this is
  // checked at every build.
  const std::string push_method_name_;
  const grpc::internal::RpcMethod push_method_;
  // The same method called as unary, for pushes of one message.
  const grpc::internal::RpcMethod push_unary_method_;
  const std::string pull_method_name_;
  const grpc::internal::RpcMethod pull_method_;
  // Starts at a random value, so that a restarted worker's new client does
  // not repeat the ids of its predecessor's last pushes, which the ps would
  // answer from its record without applying them (0 means "no id").
  std::atomic<uint64_t> next_request_id_;
  int64_t generation_ = 0;
  int64_t step_ = -1;
  std::vector<int64_t> batches_;
  bool owed_ = false;
  // Reused across pull messages, so its header is allocated once.
  PullDenseView pull_view_;
};

// The dense variables of a run, spread over ps tasks by its Placement: the
// parameter-server home of a worker's variables (ps/variable_store.h).
class PsClusterClient : public VariableStore {
 public:
  // `clients[i]` talks to ps task i. `variables` are the run's definitions.
  static absl::StatusOr<std::unique_ptr<PsClusterClient>> Create(
      std::vector<std::unique_ptr<PsClient>> clients, const Placement& placement,
      absl::Span<const VariableDef> variables);

  // Creates every ps task's pieces (optimizer and update mode as given).
  absl::Status CreateVariables(const OptimizerConfig& optimizer,
                               const UpdateConfig& update);

  // PsClient::SetWorkers on every ps task; returns the lowest version of
  // those holding variables (the step the cluster collects).
  absl::StatusOr<int64_t> SetWorkers(int replicas, absl::Span<const int> absent);

  // Checks `parts` against the run's variables (VariableStore::HoldParts):
  // from now on those are pulled and pushed as parts, each ps task sending
  // and receiving the part's rows on its piece.
  absl::Status HoldParts(
      const std::map<std::string, DensePart>& parts) override;
  // Pushes full-size gradient sums (by variable name; each float32 of the
  // variable's shape, or of its part's) to the ps tasks holding them, in
  // parallel.
  absl::Status PushDense(
      int64_t version, int64_t batch_size,
      const std::map<std::string, Tensor*>& gradients) override;

  // Pulls every variable in `values` (float32 of the variable's shape) after
  // min_version, in parallel. Returns the lowest version read.
  absl::StatusOr<int64_t> PullDense(
      int64_t min_version,
      const std::map<std::string, Tensor*>& values) override;

  // Rows of embedding table `name` for `ids` into `out` ([ids.size(),
  // width] floats), from the ps tasks holding them, in parallel.
  absl::Status PullSparse(const std::string& name,
                          absl::Span<const int64_t> ids, int64_t min_version,
                          float* out) {
    return PullRows(name, ids, min_version, /*read_only=*/false, out);
  }

  // As PullSparse, without waiting for a version and without creating
  // rows (PullSparseRequest.read_only): what evaluation reads.
  absl::Status PeekSparse(const std::string& name,
                          absl::Span<const int64_t> ids, float* out) {
    return PullRows(name, ids, 0, /*read_only=*/true, out);
  }

  // Row gradient sums `rows` ([ids.size(), width]) for `ids`.
  absl::Status PushSparse(const std::string& name,
                          absl::Span<const int64_t> ids, const float* rows,
                          int64_t version, int64_t batch_size);

  PsClient* client(int ps_task) { return clients_[ps_task].get(); }
  // Sets every client's recovery generation.
  void set_generation(int64_t generation) override {
    for (auto& client : clients_) client->set_generation(generation);
  }
  // Sets every client's step and batches (PsClient::set_step).
  void set_step(int64_t step, const std::vector<int64_t>& batches,
                bool owed = false) override {
    for (auto& client : clients_) client->set_step(step, batches, owed);
  }
  int num_ps() const { return clients_.size(); }

 private:
  PsClusterClient(std::vector<std::unique_ptr<PsClient>> clients,
                  Placement placement, std::map<std::string, VariableDef> defs);

  // The pieces of `tensors` each ps task holds.
  absl::StatusOr<std::vector<std::vector<DensePiece>>> Pieces(
      const std::map<std::string, Tensor*>& tensors) const;

  // PullSparse and PeekSparse.
  absl::Status PullRows(const std::string& name, absl::Span<const int64_t> ids,
                        int64_t min_version, bool read_only, float* out);

  // For each ps task, the positions in `ids` of the ids it holds; and the
  // table's row width.
  absl::StatusOr<std::vector<std::vector<int64_t>>> RouteIds(
      const std::string& name, absl::Span<const int64_t> ids,
      int64_t* width) const;

  // Runs fn(ps_task) for every task in parallel; the first error wins.
  absl::Status ForEachPs(const std::function<absl::Status(int)>& fn);
  // A dense push or pull to every task with pieces: one attempt each,
  // started by start(task, cq, &(*results)[task]) and driven from this
  // thread, then again(task) in parallel for those whose ps was
  // unavailable. The first error wins.
  template <typename Result, typename Start, typename Again>
  absl::Status OnEveryPs(const std::vector<std::vector<DensePiece>>& pieces,
                         Start start, Again again,
                         std::vector<Result>* results);
  // OK, or the first error of results[ps_task], naming the task.
  static absl::Status FirstError(absl::Span<const absl::Status> results);

  std::vector<std::unique_ptr<PsClient>> clients_;
  const Placement placement_;
  const std::map<std::string, VariableDef> defs_;
  // The variables held as parts (HoldParts).
  std::map<std::string, DensePart> parts_;
  ThreadPool pool_;
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_PS_CLIENT_H_

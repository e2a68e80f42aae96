// The wire half of a sparse pull or push to one ps task: one attempt of the
// unary call, started on a completion queue that its caller polls
// (RunCalls, ps/dense_call.h). SparseTables (worker/sparse_tables.h) starts
// one per ps task and table on a shared queue and drives them all from the
// trainer's thread, so a step's sparse calls to every ps are in flight at
// once without a thread per ps task (each hand-off to one, and back, is a
// pair of context switches per call).
//
//   CallQueue cq;  // declared before the calls: they go first
//   absl::StatusOr<PullSparseResponse> result;
//   std::unique_ptr<DenseCall> call =
//       StartPullSparseCall(stub, request, deadline, cq.get(), &result);
//   RunCalls({call.get()}, cq.get());
//
// The request must outlive the call's start only (gRPC serializes it
// then); the result must outlive the call. Not thread-safe.
#ifndef PSTRAIN_PS_SPARSE_CALL_H_
#define PSTRAIN_PS_SPARSE_CALL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/ps_service.grpc.pb.h"
#include "ps/dense_call.h"

namespace pstrain {
namespace ps {

// PullSparse of `request` on `stub`; the response or error goes to *result.
std::unique_ptr<DenseCall> StartPullSparseCall(
    ParameterServer::StubInterface* stub, const PullSparseRequest& request,
    absl::Time deadline, grpc::CompletionQueue* cq,
    absl::StatusOr<PullSparseResponse>* result);

// PushSparse of `request` on `stub`; the response or error goes to *result.
std::unique_ptr<DenseCall> StartPushSparseCall(
    ParameterServer::StubInterface* stub, const PushSparseRequest& request,
    absl::Time deadline, grpc::CompletionQueue* cq,
    absl::StatusOr<PushSparseResponse>* result);

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_SPARSE_CALL_H_

// The wire half of a dense push or pull to one ps task: one attempt of the
// call, started on a completion queue that its caller polls. PsClient builds
// the messages (ps/ps_client.h) and starts the calls; PsClusterClient starts
// one per ps task on a shared queue and drives them all from one thread, so
// no thread hands off to another and none waits for another to poll the
// sockets.
//
//   CallQueue cq;  // declared before the calls: they go first
//   std::unique_ptr<DenseCall> call =
//       StartPullCall({channel, cq.get(), deadline}, ..., &result);
//   RunCalls({call.get()}, cq.get());
//   ... result holds the call's outcome ...
//
// A call is driven by one thread at a time (RunCalls): not thread-safe.
#ifndef PSTRAIN_PS_DENSE_CALL_H_
#define PSTRAIN_PS_DENSE_CALL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/metrics.h"
#include "grpcpp/grpcpp.h"
#include "proto/ps_service.grpc.pb.h"
#include "ps/dense_part.h"
#include "ps/tensor_encoding.h"

namespace pstrain {
namespace ps {

// Rows [row_begin, row_end) of a dense variable of shape `shape`, as bytes:
// what one ps task holds of it. With `part`, of the part (ps/dense_part.h):
// `shape` is the part's and the rows the part's rows on that task's piece.
struct DensePiece {
  std::string name;
  TensorShapeProto shape;
  int64_t row_begin = 0;
  int64_t row_end = 0;
  std::optional<DensePart> part;
  // The piece's data (rows row_begin..row_end of the full tensor).
  char* data = nullptr;
  int64_t size = 0;
};

// One attempt of a dense push or pull: every completion whose tag is the
// call goes to Proceed, until Proceed returns false, the call over and its
// result set. A call has at most one operation pending at a time.
class DenseCall {
 public:
  virtual ~DenseCall() = default;
  virtual bool Proceed(bool ok) = 0;
};

// Where and until when a call runs: the channel to its ps task, the queue
// it is started on (and polled through, RunCalls) and its deadline.
struct CallTarget {
  grpc::ChannelInterface* channel = nullptr;
  grpc::CompletionQueue* cq = nullptr;
  absl::Time deadline = absl::InfiniteFuture();
};

// A completion queue, shut down and drained when it goes. Declare it before
// the calls started on it, so that they go first.
class CallQueue {
 public:
  CallQueue() = default;
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;
  ~CallQueue();
  grpc::CompletionQueue* get() { return &cq_; }

 private:
  grpc::CompletionQueue cq_;
};

// Polls `cq` until every call of `calls`, all started on it, is over.
void RunCalls(absl::Span<DenseCall* const> calls, grpc::CompletionQueue* cq);

// A push of `messages` (encoded PushDenseRequests whose gradients `borrowed`
// lends, see EncodePushDenseRequest): unary when it is one message (the
// usual case: on the wire a client-streaming call of one message is a unary
// call, and as one it goes in a single batch of operations), else streamed
// on `stream_method`. Its response or error goes to *result.
std::unique_ptr<DenseCall> StartPushCall(
    const CallTarget& target, const grpc::internal::RpcMethod& unary_method,
    const grpc::internal::RpcMethod& stream_method,
    std::unique_ptr<BorrowedContent> borrowed,
    std::vector<grpc::ByteBuffer> messages,
    absl::StatusOr<PushDenseResponse>* result);

// A pull of `request` whose reply messages are decoded in place into `view`
// and their chunks copied once, from gRPC's buffers, into `values` (which
// must outlive the call). *result: the lowest version read (min_version if
// no chunk came), the call's error, or INTERNAL if the ps sent something
// that does not fit the pieces (unknown name, wrong size, one variable's
// chunks from two versions). `received_bytes` (null: none) counts the
// reply messages' serialized bytes as they arrive.
std::unique_ptr<DenseCall> StartPullCall(
    const CallTarget& target, const grpc::internal::RpcMethod& method,
    const PullDenseRequest& request, absl::Span<const DensePiece> values,
    PullDenseView* view, absl::StatusOr<int64_t>* result,
    Counter* received_bytes = nullptr);

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_DENSE_CALL_H_

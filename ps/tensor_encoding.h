// Encodes (and decodes) the dense tensor messages of proto/ps_service.proto
// (pull replies and push requests) straight into gRPC byte buffers, copying
// each chunk's tensor content at most once, into the buffer gRPC sends,
// instead of twice (into the message's `content` string, then into gRPC's
// buffer when it serializes). Large contents need not be copied at all: gRPC
// can send a push's gradients from the caller's tensors (BorrowedContent)
// and a pull's values from the variable (LendPullDenseValue). Decoding
// leaves the contents in the received buffers (ps/dense_view.h).
//
// The bytes are a valid protobuf serialization of the message with the
// content set, so any peer, generated stubs included, reads them as usual.
//
//   NamedTensor value;   // everything but tensor.content
//   ...
//   std::vector<grpc::Slice> values;
//   values.push_back(EncodePullDenseValue(value, data, size));  // copies data
//   ...
//   grpc::ByteBuffer message = EncodePullDenseResponse(header, values);
#ifndef PSTRAIN_PS_TENSOR_ENCODING_H_
#define PSTRAIN_PS_TENSOR_ENCODING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/ps_service.pb.h"
#include "ps/dense_view.h"

namespace pstrain {
namespace ps {

// One element of PullDenseResponse.values, serialized with its field tag and
// length into one slice: `value` with tensor.content replaced by the `size`
// bytes at `content` (copied). value.tensor.content is ignored (it should be
// empty).
grpc::Slice EncodePullDenseValue(const NamedTensor& value, const char* content,
                                 int64_t size);

// The same element as slices appended to *out, its content lent rather than
// copied when large: a slice pointing at `content` holds a reference to
// `owner`, which keeps the bytes alive and unchanged, until gRPC lets go of
// it.
void LendPullDenseValue(const NamedTensor& value, const char* content,
                        int64_t size, std::shared_ptr<const void> owner,
                        std::vector<grpc::Slice>* out);

// `header` (its values ignored) with `values` (slices from
// EncodePullDenseValue or LendPullDenseValue) as its values, in order. The
// slices are not copied.
grpc::ByteBuffer EncodePullDenseResponse(const PullDenseResponse& header,
                                         absl::Span<const grpc::Slice> values);

// A gradient chunk of a push: `gradient` (tensor.content ignored) with the
// `size` bytes at `content` as its content.
struct GradientChunk {
  const NamedTensor* gradient = nullptr;
  const char* content = nullptr;
  int64_t size = 0;
};

// Lends the caller's tensor bytes to gRPC as slices that point at them
// instead of copies, and tracks when gRPC lets go of them: until
// WaitUntilReturned() returns, the bytes must stay alive and unchanged.
// Thread-safe (gRPC releases slices on its own threads).
class BorrowedContent {
 public:
  BorrowedContent() = default;
  BorrowedContent(const BorrowedContent&) = delete;
  BorrowedContent& operator=(const BorrowedContent&) = delete;
  // Waits for every slice to come back.
  ~BorrowedContent() { WaitUntilReturned(); }

  // A slice of the `size` bytes at `data`, counted until gRPC releases it.
  grpc::Slice Lend(const char* data, size_t size) ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until gRPC has released every slice Lend() returned: after the
  // call that sent them is destroyed, gRPC drops them soon.
  void WaitUntilReturned() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  static void Return(void* self);

  absl::Mutex mu_;
  int64_t lent_ ABSL_GUARDED_BY(mu_) = 0;
};

// `header` (its gradients ignored) with `gradients` as its gradients, in
// order. Without `borrowed`, serialized into one slice; with it, large
// contents are not copied but lent (their slices point at them) and small
// ones are copied.
grpc::ByteBuffer EncodePushDenseRequest(const PushDenseRequest& header,
                                        absl::Span<const GradientChunk> gradients,
                                        BorrowedContent* borrowed = nullptr);

// Reads `slices` (a serialized PullDenseResponse or PushDenseRequest) into
// *view, the contents left in the slices. False if the bytes are not a valid
// serialization.
bool DecodePullDenseResponse(const std::vector<grpc::Slice>& slices,
                             PullDenseView* view);
bool DecodePushDenseRequest(const std::vector<grpc::Slice>& slices,
                            PushDenseView* view);

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_TENSOR_ENCODING_H_

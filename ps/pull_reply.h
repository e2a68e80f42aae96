// The reply messages of one PullDense call. A message carries chunks of up
// to `chunk` bytes of content in all: a variable larger than that is split
// over several messages, several smaller ones share one (each message costs
// a write and a wake-up on both sides). A variable that does not fit in what
// is left of the pending message starts a new one rather than fill it, so a
// variable is split only where it must be, into chunks of `chunk` bytes.
// Chunks read at different versions never share a message.
//
//   PullReply reply(max_chunk_bytes);
//   shard->PullDense(request, [&](const DenseVariable& v,
//                                 const DensePart* part,
//                                 const ValueView& value) {
//     reply.Add(PullHeader(v, part), value);
//   });
//   std::vector<grpc::ByteBuffer> messages = reply.Finish();
#ifndef PSTRAIN_PS_PULL_REPLY_H_
#define PSTRAIN_PS_PULL_REPLY_H_

#include <cstdint>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/tensor.pb.h"
#include "ps/dense_part.h"
#include "ps/dense_variable.h"

namespace pstrain {
namespace ps {

// What each chunk of `v` says of it: its name, dtype, shape and the rows
// this shard holds; with `part`, the part's shape and its rows on the piece.
NamedTensor PullHeader(const DenseVariable& v, const DensePart* part = nullptr);

class PullReply {
 public:
  // REQUIRES: chunk > 0.
  explicit PullReply(int64_t chunk) : chunk_(chunk), room_(chunk) {}

  // Adds the chunks of one variable's value, each with `header` (PullHeader)
  // and its content offset. A value the variable lends (value.owner) is sent
  // from where it lies, else copied (under the variable's lock, as the
  // Shard calls back).
  void Add(NamedTensor header, const ValueView& value);

  // The messages, once every variable is added.
  std::vector<grpc::ByteBuffer> Finish();

 private:
  // Makes the pending chunks a message.
  void Flush();

  const int64_t chunk_;
  std::vector<grpc::ByteBuffer> messages_;
  // The message being filled: its chunks, their version, and the content
  // bytes it has room for.
  std::vector<grpc::Slice> pending_;
  int64_t pending_version_ = 0;
  int64_t room_;
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_PULL_REPLY_H_

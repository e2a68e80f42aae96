// The seam between the ring all-reduce's logic (collective/ring_allreduce.h)
// and the wire: how a participant's chunks reach its right neighbour. The
// gRPC implementation is collective/ring_grpc_transport.h; tests may put an
// in-memory one in its place. The receiving half needs no interface: whoever
// receives a stream (collective/ring_service.h) hands its messages to
// RingAllReduce's Accept/Deliver/Close methods.
#ifndef PSTRAIN_COLLECTIVE_RING_TRANSPORT_H_
#define PSTRAIN_COLLECTIVE_RING_TRANSPORT_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/collective.pb.h"

namespace pstrain {
namespace collective {

// One all-reduce's stream to the right neighbour. Start, Write and Finish
// are called from one thread, in that order; Cancel from any thread, at any
// time, even before Start. The stream has no deadline of its own: the
// all-reduce cancels it when the ring stops making progress.
class RingStream {
 public:
  virtual ~RingStream() = default;
  // Opens the stream, waiting for the neighbour to be reachable (until
  // cancelled), and sends `header`.
  virtual absl::Status Start(const RingStreamHeader& header) = 0;
  // Sends chunk `index` of step `step` with `payload` (bytes in the stream's
  // dtype). Blocks while the stream is full. An error ends the stream.
  virtual absl::Status Write(int step, int index,
                             absl::string_view payload) = 0;
  // Ends the stream: with an abort message carrying `abort_reason` first
  // when it is not empty. Returns the stream's final status (the receiver's
  // refusal, a broken connection, the deadline).
  virtual absl::Status Finish(absl::string_view abort_reason) = 0;
  // Breaks the stream off at once; a Write blocked in it returns an error.
  virtual void Cancel() = 0;
};

class RingTransport {
 public:
  virtual ~RingTransport() = default;
  // A new stream to the right neighbour, not started yet. Thread-safe.
  virtual std::unique_ptr<RingStream> NewStream() = 0;
};

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_RING_TRANSPORT_H_

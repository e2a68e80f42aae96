// The ring all-reduce's logic: sums float32 buffers across a ring of
// participants, each of which ends with the same sum, bit for bit. It knows
// nothing of gRPC: it sends through a RingTransport (collective/
// ring_transport.h) and is handed what arrives by the receiving adapter
// (collective/ring_service.h) through Accept, Deliver and Close.
//
// The algorithm is the bandwidth-optimal ring (collective/ring_plan.h): a
// reduce-scatter then an all-gather, 2 * (size - 1) steps in which each
// participant sends 1/size of the buffer to its right neighbour, in all
// 2 * (size - 1) / size of the buffer, whatever the ring size. Each step's
// segment travels in chunks of at most chunk_bytes. A chunk is summed (or,
// in the all-gather, copied) into the buffer by the thread that delivers it
// (the receiving adapter's), and forwarded at the next step by a sending
// thread while the next chunk is summed: the steps overlap, a large buffer
// streams around the ring, and a chunk passes two threads per hop. (Chunks
// that arrive before this participant starts the all-reduce are held, and
// summed when it starts.)
//
//   RingAllReduce::Create(options, &transport) -> ring (per participant)
//   ring->AllReduce(step, absl::MakeSpan(gradients));   // in place
//   ring->AllReduce(step, {span1, span2, ...});          // a bucket
//
// Every all-reduce carries an id (the training step), strictly increasing:
// a stream of an all-reduce this participant has finished or given up is
// refused, never summed. When the ring stops moving (a participant vanished,
// a link broke) every participant returns an error within `timeout` (plus
// a second or two, below) of the last chunk it received: DEADLINE_EXCEEDED
// naming the left neighbour it waited for, or UNAVAILABLE naming the
// neighbour whose stream broke or who gave up (with that one's reason). A
// participant that fails tells its right neighbour why before it closes its
// stream (taking up to a second more), so the error goes round the ring at
// once instead of by timeouts; one whose left neighbour's stream is still
// open (alive, and waiting too) waits up to a second beyond `timeout` for
// that message, so that every participant reports the vanished one.
//
// With dtype RING_DTYPE_BFLOAT16 the chunks carry bfloat16 (collective/
// bf16.h), half the bytes. Partial sums are rounded to bfloat16 when sent
// and added in float32 by the receiver; each segment's full sum is rounded
// to bfloat16 once more by its owner before the all-gather, so every
// participant ends with the same bfloat16 values (as float32). A sum of
// `size` terms thus carries up to `size` roundings of relative error 2^-8
// each (partial sums of the reduce-scatter, then the result).
//
// Thread-safety: AllReduce is called by one thread at a time (a second
// concurrent call is refused); Accept, Deliver, Close and Shutdown may be
// called from any thread at any time.
#ifndef PSTRAIN_COLLECTIVE_RING_ALLREDUCE_H_
#define PSTRAIN_COLLECTIVE_RING_ALLREDUCE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "collective/all_reducer.h"
#include "collective/ring_plan.h"
#include "collective/ring_transport.h"
#include "proto/collective.pb.h"

namespace pstrain {
namespace collective {

struct RingAllReduceOptions {
  // This participant's rank, in [0, size).
  int rank = 0;
  // Number of participants, >= 1.
  int size = 1;
  // Each participant's name for error messages (its address), by rank;
  // empty: "rank i" alone.
  std::vector<std::string> peer_names;
  // Payload bytes per chunk message, >= 4 (a multiple of the element size
  // is used).
  int64_t chunk_bytes = 1 << 20;
  // What the chunks carry: RING_DTYPE_FLOAT32 or RING_DTYPE_BFLOAT16.
  RingDtype dtype = RING_DTYPE_FLOAT32;
  // The longest an all-reduce waits for the next chunk (or for its sends to
  // go out) before it gives up. > 0.
  absl::Duration timeout = absl::Seconds(30);
};

class RingAllReduce : public AllReducer {
 public:
  // INVALID_ARGUMENT naming the option when one is out of range. `transport`
  // must outlive the ring.
  static absl::StatusOr<std::unique_ptr<RingAllReduce>> Create(
      RingAllReduceOptions options, RingTransport* transport);
  RingAllReduce(const RingAllReduce&) = delete;
  RingAllReduce& operator=(const RingAllReduce&) = delete;

  // Replaces `data` with the sum of every participant's `data` for
  // all-reduce `id`. Every participant passes the same id and the same
  // number of elements. On error `data` holds partial sums.
  // INVALID_ARGUMENT: id 0, an id not above the last one, or a neighbour
  // whose layout (size, element count, chunk, dtype) differs;
  // FAILED_PRECONDITION: another AllReduce running, or shut down;
  // DEADLINE_EXCEEDED / UNAVAILABLE: see above.
  absl::Status AllReduce(uint64_t id, absl::Span<float> data)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The same for several tensors at once, all-reduced as one flat buffer
  // (their concatenation): one ring pass however many tensors a step has.
  absl::Status AllReduce(uint64_t id,
                         absl::Span<const absl::Span<float>> tensors) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // From the next all-reduce on, the chunks carry `dtype` instead of
  // options.dtype (a worker learns the run's from the chief after its ring
  // server is up). Every participant must carry the same: a neighbour's
  // stream in another dtype fails the all-reduce (INVALID_ARGUMENT, as any
  // layout mismatch). INVALID_ARGUMENT for a dtype other than float32 and
  // bfloat16. REQUIRES: no AllReduce runs or starts meanwhile (call it
  // before the first, as a worker does, or between two from the thread
  // that calls them).
  absl::Status SetDtype(RingDtype dtype);

  // The receiving side, called by the adapter serving the left neighbour's
  // streams. Accept: a stream starts with `header`; OK to go on reading,
  // else the error to end the stream with (INVALID_ARGUMENT: not from the
  // left neighbour, or a layout unlike this participant's;
  // FAILED_PRECONDITION: an all-reduce that is over here; ALREADY_EXISTS: a
  // second stream of one all-reduce). An all-reduce this participant has not
  // started yet is accepted and held until it starts.
  absl::Status Accept(const RingStreamHeader& header) ABSL_LOCKS_EXCLUDED(mu_);
  // Chunk `index` of step `step` of all-reduce `id` (accepted before),
  // whose payload is the concatenation of `payload`'s pieces (read, not
  // kept, unless the all-reduce has not started here yet): OK, or the error
  // to end the stream with.
  absl::Status Deliver(uint64_t id, int step, int index,
                       absl::Span<const absl::string_view> payload)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Deliver(uint64_t id, int step, int index,
                       absl::string_view payload) ABSL_LOCKS_EXCLUDED(mu_);
  // The stream of all-reduce `id` ended: after an abort message carrying
  // `abort_reason`, or ("") without one, normally or broken off.
  void Close(uint64_t id, absl::string_view abort_reason)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Gives up the running all-reduce (CANCELLED) and refuses every later
  // call: the participant is going away.
  void Shutdown() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // What the left neighbour sent for one all-reduce.
  struct Incoming {
    RingStreamHeader header;
    // (step, index) -> payload of the chunks that came before the
    // all-reduce started here, until it does.
    std::map<std::pair<int, int>, std::string> chunks;
    // Every (step, index) delivered, to refuse a chunk twice.
    std::set<std::pair<int, int>> seen;
    bool closed = false;
    std::string abort_reason;
  };
  // The running all-reduce.
  struct Op;

  RingAllReduce(RingAllReduceOptions options, RingTransport* transport);

  std::string Name(int rank) const;
  int left() const { return (options_.rank + options_.size - 1) % options_.size; }
  int right() const { return (options_.rank + 1) % options_.size; }
  RingStreamHeader HeaderFor(uint64_t id, const RingPlan& plan) const;
  absl::Status CheckLayout(const RingStreamHeader& theirs,
                           const RingStreamHeader& ours) const;

  absl::Status Run(Op* op) ABSL_LOCKS_EXCLUDED(mu_);
  // Sums or copies chunk (step, index) of `op` into its buffer.
  void Apply(const Op& op, int step, int index,
             absl::Span<const absl::string_view> payload) const;
  // Apply, then counts the chunk and queues what it forwards.
  void ApplyAndForward(const Op& op, int step, int index,
                       const std::string& payload) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until every chunk of `op` is applied, or the first error.
  absl::Status WaitForChunks(const Op& op) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues chunk (step, index) for the sending thread.
  void Send(int step, int index) ABSL_LOCKS_EXCLUDED(mu_);
  // The sending thread's body.
  void SendLoop(Op* op) ABSL_LOCKS_EXCLUDED(mu_);
  // Records the running all-reduce's first error.
  void Fail(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RingAllReduceOptions options_;
  // What the next all-reduce's chunks carry, and how many elements a chunk
  // holds (options_.chunk_bytes of them). Only AllReduce and SetDtype,
  // never at once, touch them; a running all-reduce reads its own header's.
  RingDtype dtype_;
  int64_t chunk_elements_;
  RingTransport* const transport_;

  // The flat buffer of the bucketed AllReduce, reused from call to call (a
  // fresh one would cost page faults every step). Only the thread in
  // AllReduce touches it.
  std::vector<float> bucket_;

  absl::Mutex mu_;
  std::map<uint64_t, Incoming> incoming_ ABSL_GUARDED_BY(mu_);
  uint64_t last_id_ ABSL_GUARDED_BY(mu_) = 0;
  Op* running_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Why the left neighbour gave up on an all-reduce that ended here before
  // its abort came ("all-reduce 5: rank 0 (...): ..."): the likely cause
  // when it is then silent. Cleared by an all-reduce that ends well.
  std::string left_gave_up_ ABSL_GUARDED_BY(mu_);
  // The running all-reduce's: its first error, the chunks (step, index)
  // waiting for the sending thread, whether no more will come, what to tell
  // the right neighbour when giving up, whether the sending thread is done.
  absl::Status op_error_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<int, int>> send_queue_ ABSL_GUARDED_BY(mu_);
  bool send_closed_ ABSL_GUARDED_BY(mu_) = false;
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);
  bool sender_done_ ABSL_GUARDED_BY(mu_) = false;
  // Chunks applied, and Deliver calls applying one now (the all-reduce
  // does not return, leaving its buffer, before they are done).
  int64_t applied_ ABSL_GUARDED_BY(mu_) = 0;
  int applying_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_RING_ALLREDUCE_H_

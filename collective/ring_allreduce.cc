#include "collective/ring_allreduce.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collective/bf16.h"
#include "common/status_macros.h"

namespace pstrain {
namespace collective {
namespace {

int ElementBytes(RingDtype dtype) {
  return dtype == RING_DTYPE_BFLOAT16 ? 2 : 4;
}

// Element i of `src` (float32 or bfloat16 bytes) as a float32. memcpy keeps
// the unaligned, type-punned loads defined; compilers make vector loads of
// the loops below.
template <RingDtype kDtype>
float Load(const char* src, int64_t i) {
  if constexpr (kDtype == RING_DTYPE_BFLOAT16) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    return Bf16ToFloat(bits);
  } else {
    float value;
    std::memcpy(&value, src + 4 * i, 4);
    return value;
  }
}

// dst[i] += (kAdd) or = the elements of `pieces`, which hold them in
// order, split anywhere (gRPC's slices of one message), even inside one.
template <RingDtype kDtype, bool kAdd>
void ApplyPieces(absl::Span<const absl::string_view> pieces, float* dst) {
  constexpr int kSize = kDtype == RING_DTYPE_BFLOAT16 ? 2 : 4;
  char carry[kSize];
  int carried = 0;
  for (absl::string_view piece : pieces) {
    const char* src = piece.data();
    size_t left = piece.size();
    if (carried > 0) {  // an element split between pieces
      const size_t take = std::min<size_t>(kSize - carried, left);
      std::memcpy(carry + carried, src, take);
      carried += take;
      src += take;
      left -= take;
      if (carried < kSize) continue;
      const float value = Load<kDtype>(carry, 0);
      *dst = kAdd ? *dst + value : value;
      ++dst;
      carried = 0;
    }
    const int64_t n = left / kSize;
    if (kAdd) {
      for (int64_t i = 0; i < n; ++i) dst[i] += Load<kDtype>(src, i);
    } else if (kDtype == RING_DTYPE_FLOAT32) {
      std::memcpy(dst, src, n * sizeof(float));
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = Load<kDtype>(src, i);
    }
    dst += n;
    carried = static_cast<int>(left - n * kSize);
    std::memcpy(carry, src + n * kSize, carried);
  }
}

}  // namespace

struct RingAllReduce::Op {
  uint64_t id;
  RingPlan plan;
  float* data;
  RingStreamHeader header;
  // Chunks it receives, over all steps.
  int64_t expected;
  // Created before the all-reduce is published as running_, destroyed after
  // the sending thread is joined.
  std::unique_ptr<RingStream> stream;
};

absl::StatusOr<std::unique_ptr<RingAllReduce>> RingAllReduce::Create(
    RingAllReduceOptions options, RingTransport* transport) {
  if (options.size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring size ", options.size, " must be at least 1"));
  }
  if (options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", options.rank, " must be in [0, ", options.size, ")"));
  }
  if (!options.peer_names.empty() &&
      options.peer_names.size() != static_cast<size_t>(options.size)) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.peer_names.size(), " peer names for a ring of ",
                     options.size));
  }
  if (options.chunk_bytes < 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk of ", options.chunk_bytes, " bytes: must be at least 4"));
  }
  if (options.dtype != RING_DTYPE_FLOAT32 &&
      options.dtype != RING_DTYPE_BFLOAT16) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", RingDtype_Name(options.dtype),
                     ": only float32 and bfloat16 payloads exist"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout ", absl::FormatDuration(options.timeout),
                     " must be positive"));
  }
  if (transport == nullptr && options.size > 1) {
    return absl::InvalidArgumentError("a ring of several needs a transport");
  }
  return std::unique_ptr<RingAllReduce>(
      new RingAllReduce(std::move(options), transport));
}

RingAllReduce::RingAllReduce(RingAllReduceOptions options,
                             RingTransport* transport)
    : options_(std::move(options)),
      dtype_(options_.dtype),
      chunk_elements_(options_.chunk_bytes / ElementBytes(options_.dtype)),
      transport_(transport) {}

std::string RingAllReduce::Name(int rank) const {
  if (options_.peer_names.empty()) return absl::StrCat("rank ", rank);
  return absl::StrCat("rank ", rank, " (", options_.peer_names[rank], ")");
}

RingStreamHeader RingAllReduce::HeaderFor(uint64_t id,
                                          const RingPlan& plan) const {
  RingStreamHeader header;
  header.set_collective_id(id);
  header.set_sender_rank(options_.rank);
  header.set_ring_size(options_.size);
  header.set_num_elements(plan.num_elements());
  header.set_chunk_elements(plan.chunk_elements());
  header.set_dtype(dtype_);
  return header;
}

absl::Status RingAllReduce::CheckLayout(const RingStreamHeader& theirs,
                                        const RingStreamHeader& ours) const {
  if (theirs.num_elements() != ours.num_elements() ||
      theirs.chunk_elements() != ours.chunk_elements() ||
      theirs.dtype() != ours.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "all-reduce ", ours.collective_id(), ": ", Name(theirs.sender_rank()),
        " sends ", theirs.num_elements(), " elements in chunks of ",
        theirs.chunk_elements(), " as ", RingDtype_Name(theirs.dtype()), ", ",
        Name(options_.rank), " expects ", ours.num_elements(), " in chunks of ",
        ours.chunk_elements(), " as ", RingDtype_Name(ours.dtype())));
  }
  return absl::OkStatus();
}

absl::Status RingAllReduce::SetDtype(RingDtype dtype) {
  if (dtype != RING_DTYPE_FLOAT32 && dtype != RING_DTYPE_BFLOAT16) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", RingDtype_Name(dtype),
                     ": only float32 and bfloat16 payloads exist"));
  }
  dtype_ = dtype;
  chunk_elements_ = options_.chunk_bytes / ElementBytes(dtype);
  return absl::OkStatus();
}

absl::Status RingAllReduce::AllReduce(
    uint64_t id, absl::Span<const absl::Span<float>> tensors) {
  size_t total = 0;
  for (absl::Span<float> t : tensors) total += t.size();
  bucket_.resize(total);
  // An empty tensor's data() may be null, which memcpy must not get.
  float* at = bucket_.data();
  for (absl::Span<float> t : tensors) {
    if (!t.empty()) std::memcpy(at, t.data(), t.size() * sizeof(float));
    at += t.size();
  }
  PSTRAIN_RETURN_IF_ERROR(AllReduce(id, absl::MakeSpan(bucket_)));
  at = bucket_.data();
  for (absl::Span<float> t : tensors) {
    if (!t.empty()) std::memcpy(t.data(), at, t.size() * sizeof(float));
    at += t.size();
  }
  return absl::OkStatus();
}

absl::Status RingAllReduce::AllReduce(uint64_t id, absl::Span<float> data) {
  PSTRAIN_ASSIGN_OR_RETURN(
      RingPlan plan, RingPlan::Make(options_.size,
                                    static_cast<int64_t>(data.size()),
                                    chunk_elements_));
  int64_t expected = 0;
  for (int step = 0; step < plan.num_steps(); ++step) {
    expected += plan.NumChunks(plan.ReceiveSegment(options_.rank, step));
  }
  Op op{id, plan, data.data(), HeaderFor(id, plan), expected, nullptr};
  if (options_.size > 1) op.stream = transport_->NewStream();
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      return absl::FailedPreconditionError(
          absl::StrCat("all-reduce ", id, ": ", Name(options_.rank),
                       " is shut down"));
    }
    if (running_ != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("all-reduce ", id, ": all-reduce ", running_->id,
                       " is still running"));
    }
    if (id == 0 || id <= last_id_) {
      return absl::InvalidArgumentError(
          absl::StrCat("all-reduce id ", id, " must be above the last one, ",
                       last_id_, " (and 0 is never one)"));
    }
    last_id_ = id;
    // Streams of earlier all-reduces this participant skipped.
    incoming_.erase(incoming_.begin(), incoming_.lower_bound(id));
    if (options_.size == 1) return absl::OkStatus();
    running_ = &op;
    op_error_ = absl::OkStatus();
    send_queue_.clear();
    send_closed_ = false;
    abort_reason_.clear();
    sender_done_ = false;
    applied_ = 0;
    auto it = incoming_.find(id);
    if (it != incoming_.end()) Fail(CheckLayout(it->second.header, op.header));
  }
  absl::Status status = Run(&op);
  absl::MutexLock lock(&mu_);
  running_ = nullptr;
  if (status.ok()) left_gave_up_.clear();
  auto it = incoming_.find(id);
  if (it != incoming_.end()) {
    // An abort that came after the last chunk, too late to fail this one.
    if (!it->second.abort_reason.empty()) {
      left_gave_up_ =
          absl::StrCat("all-reduce ", id, ": ", it->second.abort_reason);
    }
    incoming_.erase(it);
  }
  return status;
}

absl::Status RingAllReduce::Run(Op* op) {
  const RingPlan& plan = op->plan;
  const int rank = options_.rank;
  std::thread sender([this, op] { SendLoop(op); });

  const int first = plan.SendSegment(rank, 0);
  for (int c = 0; c < plan.NumChunks(first); ++c) Send(0, c);
  // What arrived before the all-reduce started; from now on Deliver applies
  // chunks itself.
  std::map<std::pair<int, int>, std::string> early;
  {
    absl::MutexLock lock(&mu_);
    auto it = incoming_.find(op->id);
    // (Not after a layout mismatch: the chunks would not fit.)
    if (it != incoming_.end() && op_error_.ok()) {
      early.swap(it->second.chunks);
    }
  }
  for (const auto& [key, payload] : early) {
    ApplyAndForward(*op, key.first, key.second, payload);
  }
  absl::Status status = WaitForChunks(*op);

  bool failed;
  {
    absl::MutexLock lock(&mu_);
    if (!status.ok()) Fail(status);
    failed = !op_error_.ok();
    if (failed) {
      abort_reason_ = absl::StrCat(Name(rank), ": ", op_error_.message());
    }
    send_closed_ = true;
    // Let the sends drain; a failed all-reduce only tells its right
    // neighbour why, which takes a moment unless that one is stuck too.
    const absl::Duration wait = failed ? absl::Seconds(1) : options_.timeout;
    if (!mu_.AwaitWithTimeout(absl::Condition(&sender_done_), wait)) {
      Fail(absl::DeadlineExceededError(absl::StrCat(
          "all-reduce ", op->id, ": sends to ", Name(right()),
          ", the right neighbour, made no progress for ",
          absl::FormatDuration(options_.timeout))));
      // TryCancel does not block nor call back into this class.
      op->stream->Cancel();
    }
  }
  sender.join();
  absl::MutexLock lock(&mu_);
  auto idle = [this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return applying_ == 0; };
  mu_.Await(absl::Condition(&idle));
  return op_error_;
}

void RingAllReduce::Apply(const Op& op, int step, int index,
                          absl::Span<const absl::string_view> payload) const {
  const RingPlan& plan = op.plan;
  const int segment = plan.ReceiveSegment(options_.rank, step);
  float* dst = op.data + plan.SegmentBegin(segment) +
               int64_t{index} * plan.chunk_elements();
  const int64_t n = plan.ChunkLength(segment, index);
  const bool bf16 = op.header.dtype() == RING_DTYPE_BFLOAT16;
  if (!plan.IsReduceStep(step)) {
    if (bf16) {
      ApplyPieces<RING_DTYPE_BFLOAT16, false>(payload, dst);
    } else {
      ApplyPieces<RING_DTYPE_FLOAT32, false>(payload, dst);
    }
    return;
  }
  if (bf16) {
    ApplyPieces<RING_DTYPE_BFLOAT16, true>(payload, dst);
  } else {
    ApplyPieces<RING_DTYPE_FLOAT32, true>(payload, dst);
  }
  // The segment's full sum: rounded once, here, so that its owner holds
  // what the all-gather gives everyone else.
  if (step == plan.size() - 2 && bf16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = RoundToBf16(dst[i]);
  }
}

void RingAllReduce::ApplyAndForward(const Op& op, int step, int index,
                                    const std::string& payload) {
  const absl::string_view piece(payload);
  Apply(op, step, index, absl::MakeConstSpan(&piece, 1));
  absl::MutexLock lock(&mu_);
  ++applied_;
  if (step + 1 < op.plan.num_steps()) send_queue_.emplace_back(step + 1, index);
}

absl::Status RingAllReduce::WaitForChunks(const Op& op) {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!op_error_.ok() || applied_ == op.expected) return true;
    auto it = incoming_.find(op.id);
    return it != incoming_.end() && it->second.closed && applying_ == 0;
  };
  while (true) {
    const int64_t before = applied_;
    bool arrived =
        mu_.AwaitWithTimeout(absl::Condition(&ready), options_.timeout);
    if (!arrived && applied_ != before) continue;  // progress: wait on
    if (!arrived) {
      // A left neighbour whose stream is still open is alive, and most
      // likely waiting for its own left neighbour, whose wait began earlier
      // and ends first: a moment more brings its abort and the failure's
      // real cause.
      auto it = incoming_.find(op.id);
      if (it != incoming_.end() && !it->second.closed) {
        arrived =
            mu_.AwaitWithTimeout(absl::Condition(&ready),
                                 std::min(options_.timeout, absl::Seconds(1)));
      }
    }
    if (!op_error_.ok()) return op_error_;
    if (applied_ == op.expected) return absl::OkStatus();
    const std::string progress =
        absl::StrCat(" (", applied_, " of ", op.expected, " chunks arrived)");
    if (!arrived) {
      std::string cause;
      if (!left_gave_up_.empty()) {
        cause = absl::StrCat("; it had given up on ", left_gave_up_);
      }
      Fail(absl::DeadlineExceededError(absl::StrCat(
          "all-reduce ", op.id, ": nothing from ", Name(left()),
          ", the left neighbour, for ", absl::FormatDuration(options_.timeout),
          progress, cause)));
      return op_error_;
    }
    const Incoming& incoming = incoming_.find(op.id)->second;
    if (!incoming.abort_reason.empty()) {
      Fail(absl::UnavailableError(absl::StrCat(
          "all-reduce ", op.id, ": ", Name(left()),
          ", the left neighbour, gave up: ", incoming.abort_reason)));
    } else {
      Fail(absl::UnavailableError(
          absl::StrCat("all-reduce ", op.id, ": the stream from ", Name(left()),
                       ", the left neighbour, broke off", progress)));
    }
    return op_error_;
  }
}

void RingAllReduce::Send(int step, int index) {
  absl::MutexLock lock(&mu_);
  send_queue_.emplace_back(step, index);
}

void RingAllReduce::SendLoop(Op* op) {
  const RingPlan& plan = op->plan;
  absl::Status status = op->stream->Start(op->header);
  std::vector<uint16_t> scratch;
  while (status.ok()) {
    std::pair<int, int> item;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !send_queue_.empty() || send_closed_ || !op_error_.ok();
      };
      mu_.Await(absl::Condition(&ready));
      if (send_queue_.empty() || !op_error_.ok()) break;
      item = send_queue_.front();
      send_queue_.pop_front();
    }
    const auto [step, index] = item;
    const int segment = plan.SendSegment(options_.rank, step);
    const float* src = op->data + plan.SegmentBegin(segment) +
                       int64_t{index} * plan.chunk_elements();
    const int64_t n = plan.ChunkLength(segment, index);
    absl::string_view payload;
    if (op->header.dtype() == RING_DTYPE_BFLOAT16) {
      scratch.resize(n);
      for (int64_t i = 0; i < n; ++i) scratch[i] = FloatToBf16(src[i]);
      payload = absl::string_view(reinterpret_cast<const char*>(scratch.data()),
                                  n * sizeof(uint16_t));
    } else {
      payload = absl::string_view(reinterpret_cast<const char*>(src),
                                  n * sizeof(float));
    }
    status = op->stream->Write(step, index, payload);
  }
  std::string abort_reason;
  {
    absl::MutexLock lock(&mu_);
    // Wait for the all-reduce to finish or fail, so an abort carries why.
    if (status.ok()) mu_.Await(absl::Condition(&send_closed_));
    abort_reason = abort_reason_;
  }
  absl::Status finished = op->stream->Finish(status.ok() ? abort_reason : "");
  if (status.ok()) status = finished;
  absl::MutexLock lock(&mu_);
  if (!status.ok()) {
    Fail(absl::Status(
        status.code(),
        absl::StrCat("all-reduce ", op->id, ": sending to ", Name(right()),
                     ", the right neighbour: ", status.message())));
  }
  sender_done_ = true;
}

void RingAllReduce::Fail(absl::Status status) {
  if (op_error_.ok()) op_error_ = std::move(status);
}

absl::Status RingAllReduce::Accept(const RingStreamHeader& header) {
  const uint64_t id = header.collective_id();
  absl::MutexLock lock(&mu_);
  if (shut_down_) {
    return absl::UnavailableError(
        absl::StrCat(Name(options_.rank), " is shut down"));
  }
  if (header.sender_rank() != left() || header.ring_size() != options_.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "all-reduce ", id, ": a stream from rank ", header.sender_rank(),
        " of a ring of ", header.ring_size(), "; ", Name(options_.rank),
        " of a ring of ", options_.size, " takes only ", Name(left()), "'s"));
  }
  absl::StatusOr<RingPlan> plan = RingPlan::Make(
      header.ring_size(), header.num_elements(), header.chunk_elements());
  if (id == 0 || !plan.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("all-reduce ", id, " from ", Name(left()), ": ",
                     id == 0 ? "id 0 is never one" : plan.status().message()));
  }
  const bool current = running_ != nullptr && running_->id == id;
  if (id < last_id_ || (id == last_id_ && !current)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "all-reduce ", id, " is over at ", Name(options_.rank),
        " (its last is ", last_id_, "): a late stream is not summed"));
  }
  if (incoming_.count(id) > 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "all-reduce ", id, ": a second stream from ", Name(left())));
  }
  if (current) {
    absl::Status layout = CheckLayout(header, running_->header);
    if (!layout.ok()) {
      Fail(layout);
      return layout;
    }
  }
  incoming_[id].header = header;
  return absl::OkStatus();
}

absl::Status RingAllReduce::Deliver(uint64_t id, int step, int index,
                                    absl::string_view payload) {
  return Deliver(id, step, index, absl::MakeConstSpan(&payload, 1));
}

absl::Status RingAllReduce::Deliver(
    uint64_t id, int step, int index,
    absl::Span<const absl::string_view> payload) {
  size_t payload_size = 0;
  for (absl::string_view piece : payload) payload_size += piece.size();
  absl::MutexLock lock(&mu_);
  auto it = incoming_.find(id);
  if (it == incoming_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "all-reduce ", id, " is over at ", Name(options_.rank),
        ": a late chunk is not summed"));
  }
  Incoming& incoming = it->second;
  const RingStreamHeader& header = incoming.header;
  // Accept checked the layout.
  RingPlan plan = *RingPlan::Make(header.ring_size(), header.num_elements(),
                                  header.chunk_elements());
  absl::Status problem;
  if (step < 0 || step >= plan.num_steps()) {
    problem = absl::InvalidArgumentError(absl::StrCat(
        "step ", step, " is not in [0, ", plan.num_steps(), ")"));
  } else {
    const int segment = plan.ReceiveSegment(options_.rank, step);
    if (index < 0 || index >= plan.NumChunks(segment)) {
      problem = absl::InvalidArgumentError(
          absl::StrCat("chunk ", index, " of step ", step, " is not in [0, ",
                       plan.NumChunks(segment), ")"));
    } else if (static_cast<int64_t>(payload_size) !=
               plan.ChunkLength(segment, index) *
                   ElementBytes(header.dtype())) {
      problem = absl::InvalidArgumentError(absl::StrCat(
          "chunk ", index, " of step ", step, " has ", payload_size,
          " bytes, not ",
          plan.ChunkLength(segment, index) * ElementBytes(header.dtype())));
    } else if (!incoming.seen.insert(std::make_pair(step, index)).second) {
      problem = absl::InvalidArgumentError(
          absl::StrCat("chunk ", index, " of step ", step, " came twice"));
    }
  }
  if (problem.ok()) {
    Op* op = running_;
    if (op == nullptr || op->id != id) {
      // Held until the all-reduce starts here.
      incoming.chunks.emplace(std::make_pair(step, index),
                              absl::StrJoin(payload, ""));
      return absl::OkStatus();
    }
    if (!op_error_.ok()) return absl::OkStatus();  // it ends anyway
    ++applying_;
    mu_.Unlock();
    // The chunk's region is this call's alone, and the all-reduce waits
    // for applying_ to fall to 0 before it returns.
    Apply(*op, step, index, payload);
    mu_.Lock();
    --applying_;
    ++applied_;
    if (step + 1 < op->plan.num_steps()) {
      send_queue_.emplace_back(step + 1, index);
    }
    return absl::OkStatus();
  }
  problem = absl::InvalidArgumentError(absl::StrCat(
      "all-reduce ", id, " from ", Name(left()), ": ", problem.message()));
  if (running_ != nullptr && running_->id == id) Fail(problem);
  return problem;
}

void RingAllReduce::Close(uint64_t id, absl::string_view abort_reason) {
  absl::MutexLock lock(&mu_);
  auto it = incoming_.find(id);
  if (it == incoming_.end()) {
    // The stream of an all-reduce that has ended here.
    if (!abort_reason.empty() && id <= last_id_) {
      left_gave_up_ = absl::StrCat("all-reduce ", id, ": ", abort_reason);
    }
    return;
  }
  it->second.closed = true;
  it->second.abort_reason = std::string(abort_reason);
}

void RingAllReduce::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  if (running_ != nullptr) {
    Fail(absl::CancelledError(absl::StrCat(
        "all-reduce ", running_->id, ": ", Name(options_.rank),
        " is shutting down")));
    // TryCancel does not block nor call back into this class.
    running_->stream->Cancel();
  }
}

}  // namespace collective
}  // namespace pstrain

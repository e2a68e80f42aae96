// Fuzzes what a ring participant does with its left neighbour's streams,
// the only input a worker in collective mode takes from another process:
// the hand-written decoding of each message (collective/ring_wire.h) and the
// receiving half of the ring (RingAllReduce::Accept, Deliver and Close of
// rank 1, collective/ring_allreduce.h), then an all-reduce of its own.
// Input (FuzzReader):
//
//   options byte   bit 0: a ring of 3 (else 2); bit 1: bfloat16 chunks;
//                  bit 2: run the all-reduce after the streams
//   layout byte    the all-reduce's elements (bits 0-4, 0-31) and chunk
//                  bytes (4 * (1 + bits 5-7))
//   id byte        the all-reduce's id, 1 + (id % 4)
//   then up to 32 messages, each a cut byte (bit 7: the record is in text
//   format, fuzz_util.h: ParseMessage; bits 0-6: the bytes are cut into
//   slices of that many, as gRPC may deliver them, 0 whole) and a record.
//
// Messages reach the ring as collective/ring_service.cc hands them on: a
// header ends the stream before it (Close) and starts one (Accept), chunks
// are delivered to the stream's all-reduce, an abort is kept for its Close,
// and a message that does not decode or is refused ends the stream. The
// all-reduce (data[i] = i + 1, on a transport that takes every send) waits
// 5 ms for what was not sent. Checks:
//   - DecodeRingMessage accepts exactly what protobuf's parser accepts, and
//     reads the same message;
//   - refusals carry a message and one of the codes the header names;
//   - an all-reduce that succeeds in float32 ends with what its left
//     neighbour sent: in the segment rank 1 reduces, its own elements plus
//     the chunks of the last reduce-scatter step, elsewhere the chunks of
//     the all-gather.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "collective/discarding_transport.h"
#include "collective/ring_allreduce.h"
#include "collective/ring_plan.h"
#include "collective/ring_wire.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain {
namespace collective {
namespace {

using google::protobuf::util::MessageDifferencer;

grpc::ByteBuffer Cut(absl::string_view bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  if (piece == 0) piece = std::max<size_t>(bytes.size(), 1);
  for (size_t i = 0; i < bytes.size(); i += piece) {
    slices.emplace_back(bytes.data() + i, std::min(piece, bytes.size() - i));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// The message `decoded` holds, its payload put back.
RingMessage Assemble(const DecodedRingMessage& decoded) {
  RingMessage message = decoded.message;
  if (message.has_chunk()) {
    message.mutable_chunk()->set_payload(absl::StrJoin(decoded.payload, ""));
  } else {
    PSTRAIN_FUZZ_EXPECT(decoded.payload.empty(), "a payload without a chunk");
  }
  return message;
}

void ExpectRefusal(const absl::Status& status, absl::string_view call) {
  if (status.ok()) return;
  PSTRAIN_FUZZ_EXPECT(!status.message().empty(), call,
                      ": an error without a message");
  PSTRAIN_FUZZ_EXPECT(absl::IsInvalidArgument(status) ||
                          absl::IsFailedPrecondition(status) ||
                          absl::IsAlreadyExists(status),
                      call, ": unexpected code: ", status.ToString());
}

bool SameFloat(float a, float b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

void FuzzOne(const uint8_t* data, size_t size) {
  fuzz::FuzzReader in(data, size);
  const uint8_t options_byte = in.Byte();
  const uint8_t layout = in.Byte();
  const uint64_t run_id = 1 + in.Byte() % 4;

  RingAllReduceOptions options;
  options.rank = 1;
  options.size = (options_byte & 1) ? 3 : 2;
  options.dtype = (options_byte & 2) ? RING_DTYPE_BFLOAT16 : RING_DTYPE_FLOAT32;
  const int64_t element_bytes = (options_byte & 2) ? 2 : 4;
  options.chunk_bytes = 4 * (1 + (layout >> 5));
  const int64_t chunk_elements = options.chunk_bytes / element_bytes;
  options.timeout = absl::Milliseconds(5);
  DiscardingTransport transport;
  auto ring = RingAllReduce::Create(options, &transport);
  PSTRAIN_FUZZ_EXPECT(ring.ok(), ring.status().ToString());

  // The payload of every chunk delivered without an error, by (id, step,
  // index): one stream per all-reduce, and a chunk comes once in it.
  std::map<std::tuple<uint64_t, int, int>, std::string> delivered;
  bool open = false;
  uint64_t id = 0;
  std::string abort_reason;
  const auto close = [&] {
    if (open) (*ring)->Close(id, abort_reason);
    open = false;
    abort_reason.clear();
  };
  for (int m = 0; m < 32 && !in.empty(); ++m) {
    const uint8_t cut = in.Byte();
    const absl::string_view record = in.Record();
    std::string bytes(record);
    if (cut & 0x80) {
      RingMessage text;
      if (!fuzz::ParseMessage(record, /*text=*/true, &text)) continue;
      bytes = text.SerializeAsString();
    }
    DecodedRingMessage decoded;
    const absl::Status status =
        DecodeRingMessage(Cut(bytes, cut & 0x7f), &decoded);
    RingMessage parsed;
    const bool parses = parsed.ParseFromString(bytes);
    PSTRAIN_FUZZ_EXPECT(status.ok() == parses,
                        "DecodeRingMessage: ", status.ToString(),
                        "; protobuf parses: ", parses);
    if (!status.ok()) {
      ExpectRefusal(status, "DecodeRingMessage");
      close();
      continue;
    }
    const RingMessage message = Assemble(decoded);
    PSTRAIN_FUZZ_EXPECT(MessageDifferencer::Equals(parsed, message), "decoded ",
                        message.ShortDebugString(), ", protobuf read ",
                        parsed.ShortDebugString());
    absl::Status refused;
    switch (message.kind_case()) {
      case RingMessage::kHeader:
        close();
        id = message.header().collective_id();
        refused = (*ring)->Accept(message.header());
        ExpectRefusal(refused, "Accept");
        open = refused.ok();
        break;
      case RingMessage::kChunk:
        if (!open) break;
        refused = (*ring)->Deliver(id, message.chunk().step(),
                                   message.chunk().index(), decoded.payload);
        ExpectRefusal(refused, "Deliver");
        if (refused.ok()) {
          delivered[std::make_tuple(id, message.chunk().step(),
                                    message.chunk().index())] =
              message.chunk().payload();
        } else {
          close();
        }
        break;
      case RingMessage::kAbort:
        abort_reason = message.abort();
        break;
      default:
        close();
    }
  }
  close();
  if ((options_byte & 4) == 0) return;

  std::vector<float> values(layout & 31);
  for (size_t i = 0; i < values.size(); ++i) values[i] = i + 1.0f;
  const std::vector<float> own = values;
  const absl::Status status =
      (*ring)->AllReduce(run_id, absl::MakeSpan(values));
  PSTRAIN_FUZZ_EXPECT(status.ok() || !status.message().empty(),
                      "AllReduce: an error without a message");
  if (!status.ok() || options.dtype != RING_DTYPE_FLOAT32) return;
  auto plan = RingPlan::Make(options.size, own.size(), chunk_elements);
  PSTRAIN_FUZZ_EXPECT(plan.ok(), plan.status().ToString());
  std::vector<float> expected = own;
  for (int step = 0; step < plan->num_steps(); ++step) {
    // The steps before the last of the reduce-scatter only pass sums on:
    // the all-gather replaces what they left.
    if (step < options.size - 2) continue;
    const int segment = plan->ReceiveSegment(options.rank, step);
    for (int c = 0; c < plan->NumChunks(segment); ++c) {
      auto it = delivered.find(std::make_tuple(run_id, step, c));
      PSTRAIN_FUZZ_EXPECT(it != delivered.end(), "all-reduce ", run_id,
                          " succeeded without chunk ", c, " of step ", step);
      const int64_t begin =
          plan->SegmentBegin(segment) + c * plan->chunk_elements();
      const int64_t length = plan->ChunkLength(segment, c);
      PSTRAIN_FUZZ_EXPECT(static_cast<int64_t>(it->second.size()) == 4 * length,
                          "chunk ", c, " of step ", step, ": ",
                          it->second.size(), " bytes");
      for (int64_t i = 0; i < length; ++i) {
        float sent;
        std::memcpy(&sent, it->second.data() + 4 * i, 4);
        expected[begin + i] =
            plan->IsReduceStep(step) ? own[begin + i] + sent : sent;
      }
    }
  }
  for (size_t i = 0; i < values.size(); ++i) {
    PSTRAIN_FUZZ_EXPECT(SameFloat(values[i], expected[i]), "element ", i, ": ",
                        values[i], ", expected ", expected[i]);
  }
}

}  // namespace
}  // namespace collective
}  // namespace pstrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pstrain::collective::FuzzOne(data, size);
  return 0;
}

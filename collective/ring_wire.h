// The bytes of the ring's stream messages (RingMessage, proto/collective.
// proto), encoded and decoded by hand for chunks so that a payload is copied
// once on its way out and not at all on its way in: the sender puts it in a
// slice of its own after a short prefix (the generated code would copy it
// into the message, then into gRPC's buffer), and the receiver reads it
// where gRPC received it (the generated code would copy it into a string).
// The bytes are an ordinary RingMessage serialization, and any RingMessage
// serialization decodes (those not laid out as EncodeRingChunk lays them out
// take the generated parser).
#ifndef PSTRAIN_COLLECTIVE_RING_WIRE_H_
#define PSTRAIN_COLLECTIVE_RING_WIRE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/collective.pb.h"

namespace pstrain {
namespace collective {

// A RingMessage holding chunk {step, index, payload}; `payload` is copied.
grpc::ByteBuffer EncodeRingChunk(int step, int index,
                                 absl::string_view payload);

// `message`, serialized (headers and aborts).
grpc::ByteBuffer EncodeRingMessage(const RingMessage& message);

// A received RingMessage. For a chunk, `message` has its step and index but
// no payload: the payload is the concatenation of `payload`'s pieces, which
// point into `slices` (or into `message`, when the generated parser read
// it). Not copyable: the pieces point into it.
struct DecodedRingMessage {
  DecodedRingMessage() = default;
  DecodedRingMessage(const DecodedRingMessage&) = delete;
  DecodedRingMessage& operator=(const DecodedRingMessage&) = delete;

  RingMessage message;
  std::vector<absl::string_view> payload;
  std::vector<grpc::Slice> slices;
};

// Decodes `buffer` into *out (replacing what it held). INVALID_ARGUMENT if
// the bytes are not a RingMessage.
absl::Status DecodeRingMessage(const grpc::ByteBuffer& buffer,
                               DecodedRingMessage* out);

}  // namespace collective
}  // namespace pstrain

#endif  // PSTRAIN_COLLECTIVE_RING_WIRE_H_

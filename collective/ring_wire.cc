#include "collective/ring_wire.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "google/protobuf/io/coded_stream.h"

namespace pstrain {
namespace collective {
namespace {

// Field tags: RingMessage.chunk (2, length-delimited); RingChunk.step (1,
// varint), index (2, varint), payload (3, length-delimited).
constexpr uint8_t kChunkTag = 0x12;
constexpr uint8_t kStepTag = 0x08;
constexpr uint8_t kIndexTag = 0x10;
constexpr uint8_t kPayloadTag = 0x1a;

// Reads bytes across a message's slices.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices)
      : slices_(slices) {}

  bool AtEnd() {
    SkipEmpty();
    return slice_ == slices_.size();
  }

  bool ReadByte(uint8_t* byte) {
    SkipEmpty();
    if (slice_ == slices_.size()) return false;
    *byte = slices_[slice_].begin()[offset_++];
    return true;
  }

  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  // The next `size` bytes, as pieces of the slices.
  bool Take(uint64_t size, std::vector<absl::string_view>* pieces) {
    while (size > 0) {
      SkipEmpty();
      if (slice_ == slices_.size()) return false;
      const grpc::Slice& slice = slices_[slice_];
      const uint64_t n = std::min<uint64_t>(size, slice.size() - offset_);
      pieces->emplace_back(
          reinterpret_cast<const char*>(slice.begin()) + offset_, n);
      offset_ += n;
      size -= n;
    }
    return true;
  }

  uint64_t position() const { return consumed_before_ + offset_; }

 private:
  void SkipEmpty() {
    while (slice_ < slices_.size() && offset_ == slices_[slice_].size()) {
      consumed_before_ += slices_[slice_].size();
      ++slice_;
      offset_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t offset_ = 0;
  uint64_t consumed_before_ = 0;
};

// The chunk at `reader`, laid out as EncodeRingChunk lays it out (a
// generic encoder may leave out a zero step or index, which is fine, or
// order fields otherwise, which takes the slow path).
bool DecodeChunkFast(SliceReader* reader, DecodedRingMessage* out) {
  uint8_t tag;
  uint64_t chunk_size;
  if (!reader->ReadByte(&tag) || tag != kChunkTag ||
      !reader->ReadVarint(&chunk_size)) {
    return false;
  }
  const uint64_t end = reader->position() + chunk_size;
  RingChunk* chunk = out->message.mutable_chunk();
  bool payload_seen = false;
  while (reader->position() < end) {
    uint64_t value;
    if (!reader->ReadByte(&tag) || payload_seen) return false;
    if (tag == kStepTag || tag == kIndexTag) {
      if (!reader->ReadVarint(&value)) return false;
      const int32_t field = static_cast<int32_t>(value);
      if (tag == kStepTag) {
        chunk->set_step(field);
      } else {
        chunk->set_index(field);
      }
    } else if (tag == kPayloadTag) {
      if (!reader->ReadVarint(&value) || !reader->Take(value, &out->payload)) {
        return false;
      }
      payload_seen = true;
    } else {
      return false;
    }
  }
  return reader->position() == end && reader->AtEnd();
}

}  // namespace

grpc::ByteBuffer EncodeRingChunk(int step, int index,
                                 absl::string_view payload) {
  using google::protobuf::io::CodedOutputStream;
  uint8_t fields[32];
  uint8_t* end = fields;
  *end++ = kStepTag;
  end = CodedOutputStream::WriteVarint64ToArray(static_cast<int64_t>(step),
                                                end);
  *end++ = kIndexTag;
  end = CodedOutputStream::WriteVarint64ToArray(static_cast<int64_t>(index),
                                                end);
  *end++ = kPayloadTag;
  end = CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>(payload.size()), end);
  uint8_t prefix[48];
  uint8_t* at = prefix;
  *at++ = kChunkTag;
  at = CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>((end - fields) + payload.size()), at);
  std::memcpy(at, fields, end - fields);
  at += end - fields;
  grpc::Slice slices[2] = {grpc::Slice(prefix, at - prefix),
                           grpc::Slice(payload.data(), payload.size())};
  return grpc::ByteBuffer(slices, 2);
}

grpc::ByteBuffer EncodeRingMessage(const RingMessage& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

absl::Status DecodeRingMessage(const grpc::ByteBuffer& buffer,
                               DecodedRingMessage* out) {
  out->message.Clear();
  out->payload.clear();
  out->slices.clear();
  if (!buffer.Dump(&out->slices).ok()) {
    return absl::InvalidArgumentError("RingMessage: unreadable buffer");
  }
  SliceReader reader(out->slices);
  if (DecodeChunkFast(&reader, out)) return absl::OkStatus();
  // Anything else (a header, an abort, a chunk laid out otherwise): the
  // generated parser, on the bytes joined.
  out->message.Clear();
  out->payload.clear();
  std::string bytes;
  for (const grpc::Slice& slice : out->slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  out->slices.clear();
  if (!out->message.ParseFromString(bytes)) {
    return absl::InvalidArgumentError("RingMessage: malformed message");
  }
  if (out->message.has_chunk()) {
    out->payload.push_back(out->message.chunk().payload());
  }
  return absl::OkStatus();
}

}  // namespace collective
}  // namespace pstrain

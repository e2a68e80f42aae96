#include "collective/ring_wire.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace collective {
namespace {

std::string Bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes;
}

// `bytes` in slices of `size` bytes, as gRPC may hand a message over.
grpc::ByteBuffer Split(const std::string& bytes, size_t size) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += size) {
    slices.emplace_back(bytes.data() + at, std::min(size, bytes.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(RingWire, AnEncodedChunkIsTheGeneratedCodesRingMessage) {
  const std::string payload(1000, 'x');
  RingMessage parsed;
  ASSERT_TRUE(
      parsed.ParseFromString(Bytes(EncodeRingChunk(3, 70000, payload))));
  EXPECT_EQ(parsed.chunk().step(), 3);
  EXPECT_EQ(parsed.chunk().index(), 70000);
  EXPECT_EQ(parsed.chunk().payload(), payload);
}

TEST(RingWire, DecodesChunksInPlaceHoweverTheyAreSliced) {
  std::string payload;
  for (int i = 0; i < 4099; ++i) payload.push_back(static_cast<char>(i * 7));
  const std::string bytes = Bytes(EncodeRingChunk(0, 5, payload));
  for (size_t size : {1, 2, 3, 7, 100, 5000}) {
    DecodedRingMessage decoded;
    ASSERT_TRUE(DecodeRingMessage(Split(bytes, size), &decoded).ok());
    ASSERT_TRUE(decoded.message.has_chunk()) << size;
    EXPECT_EQ(decoded.message.chunk().step(), 0);
    EXPECT_EQ(decoded.message.chunk().index(), 5);
    // In place: the generated parser's copy stays empty.
    EXPECT_TRUE(decoded.message.chunk().payload().empty());
    EXPECT_EQ(absl::StrJoin(decoded.payload, ""), payload) << size;
  }
}

TEST(RingWire, DecodesAnyRingMessageTheGeneratedCodeWrites) {
  RingMessage header;
  header.mutable_header()->set_collective_id(9);
  header.mutable_header()->set_num_elements(123);
  DecodedRingMessage decoded;
  ASSERT_TRUE(DecodeRingMessage(EncodeRingMessage(header), &decoded).ok());
  EXPECT_EQ(decoded.message.header().collective_id(), 9u);
  EXPECT_EQ(decoded.message.header().num_elements(), 123);
  EXPECT_TRUE(decoded.payload.empty());

  RingMessage abort;
  abort.set_abort("rank 2 went away");
  ASSERT_TRUE(DecodeRingMessage(EncodeRingMessage(abort), &decoded).ok());
  EXPECT_EQ(decoded.message.abort(), "rank 2 went away");

  // A chunk as the generated code lays it out (step 0 left out).
  RingMessage chunk;
  chunk.mutable_chunk()->set_index(4);
  chunk.mutable_chunk()->set_payload("abcdefgh");
  ASSERT_TRUE(
      DecodeRingMessage(Split(chunk.SerializeAsString(), 3), &decoded).ok());
  EXPECT_EQ(decoded.message.chunk().step(), 0);
  EXPECT_EQ(decoded.message.chunk().index(), 4);
  EXPECT_EQ(absl::StrJoin(decoded.payload, ""), "abcdefgh");
}

TEST(RingWire, RefusesBytesThatAreNoRingMessage) {
  DecodedRingMessage decoded;
  // A chunk whose payload length runs past the end.
  std::string bytes = Bytes(EncodeRingChunk(1, 1, std::string(50, 'a')));
  bytes.resize(bytes.size() - 10);
  EXPECT_EQ(DecodeRingMessage(Split(bytes, 8), &decoded).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeRingMessage(Split("\xff\xff\xff", 8), &decoded).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace collective
}  // namespace pstrain

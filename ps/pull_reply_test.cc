#include "ps/pull_reply.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/ps_service.pb.h"

namespace pstrain {
namespace ps {
namespace {

NamedTensor Header(const std::string& name) {
  NamedTensor header;
  header.set_name(name);
  header.mutable_tensor()->set_dtype(DT_FLOAT);
  return header;
}

ValueView View(const std::string& bytes, int64_t version) {
  ValueView view;
  view.version = version;
  view.data = bytes.data();
  view.size = static_cast<int64_t>(bytes.size());
  return view;
}

std::vector<PullDenseResponse> Parse(
    const std::vector<grpc::ByteBuffer>& messages) {
  std::vector<PullDenseResponse> parsed;
  for (const grpc::ByteBuffer& buffer : messages) {
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(buffer.Dump(&slices).ok());
    std::string bytes;
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    parsed.emplace_back();
    EXPECT_TRUE(parsed.back().ParseFromString(bytes));
  }
  return parsed;
}

// (name, content_offset, content) of each chunk of `message`.
std::vector<std::tuple<std::string, int64_t, std::string>> Chunks(
    const PullDenseResponse& message) {
  std::vector<std::tuple<std::string, int64_t, std::string>> chunks;
  for (const NamedTensor& value : message.values()) {
    chunks.emplace_back(value.name(), value.tensor().content_offset(),
                        value.tensor().content());
  }
  return chunks;
}

TEST(PullReply, SplitsOnlyWhatExceedsAChunkAndNeverMixesVersions) {
  const std::string a(40, 'a'), b(100, 'b'), c(8, 'c'), d(4, 'd');
  PullReply reply(/*chunk=*/64);
  reply.Add(Header("a"), View(a, 3));
  // 100 bytes do not fit in the 24 left: b starts a message, then fills a
  // second one.
  reply.Add(Header("b"), View(b, 3));
  // Read at another version: a message of its own, shared with d.
  reply.Add(Header("c"), View(c, 4));
  reply.Add(Header("d"), View(d, 4));
  const std::vector<PullDenseResponse> messages = Parse(reply.Finish());
  ASSERT_EQ(messages.size(), 4u);
  using Chunk = std::tuple<std::string, int64_t, std::string>;
  EXPECT_EQ(Chunks(messages[0]), (std::vector<Chunk>{{"a", 0, a}}));
  EXPECT_EQ(Chunks(messages[1]),
            (std::vector<Chunk>{{"b", 0, b.substr(0, 64)}}));
  EXPECT_EQ(Chunks(messages[2]),
            (std::vector<Chunk>{{"b", 64, b.substr(64)}}));
  EXPECT_EQ(Chunks(messages[3]),
            (std::vector<Chunk>{{"c", 0, c}, {"d", 0, d}}));
  for (int i : {0, 1, 2}) EXPECT_EQ(messages[i].version(), 3);
  EXPECT_EQ(messages[3].version(), 4);
}

TEST(PullReply, LentValuesAreSentAsTheyLie) {
  auto owner = std::make_shared<std::string>(10, 'x');
  ValueView view = View(*owner, 1);
  view.owner = owner;
  PullReply reply(/*chunk=*/4);
  reply.Add(Header("x"), view);
  const std::vector<PullDenseResponse> messages = Parse(reply.Finish());
  ASSERT_EQ(messages.size(), 3u);
  std::string whole;
  for (const PullDenseResponse& m : messages) {
    ASSERT_EQ(m.values_size(), 1);
    EXPECT_EQ(m.values(0).tensor().content_offset(),
              static_cast<int64_t>(whole.size()));
    whole += m.values(0).tensor().content();
  }
  EXPECT_EQ(whole, *owner);
}

TEST(PullReply, NoVariablesMakeNoMessage) {
  PullReply reply(16);
  EXPECT_TRUE(reply.Finish().empty());
}

}  // namespace
}  // namespace ps
}  // namespace pstrain

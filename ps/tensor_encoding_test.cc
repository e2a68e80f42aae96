#include "ps/tensor_encoding.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace ps {
namespace {

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

PullDenseResponse Header() {
  PullDenseResponse header;
  header.set_version(42);
  NamedTensor* value = header.mutable_value();
  value->set_name("dense/kernel");
  TensorProto* t = value->mutable_tensor();
  t->set_dtype(DT_FLOAT);
  t->mutable_shape()->add_dims(1000);
  t->mutable_shape()->add_dims(64);
  t->mutable_slice()->set_begin(10);
  t->mutable_slice()->set_end(500);
  t->set_content_offset(4096);
  return header;
}

TEST(EncodePullDenseResponse, ParsesAsTheMessageWithContent) {
  // Large enough that every length takes a multi-byte varint.
  std::string content(300000, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 7);
  const PullDenseResponse header = Header();
  PullDenseResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(
      EncodePullDenseResponse(header, content.data(), content.size()))));
  PullDenseResponse expected = header;
  expected.mutable_value()->mutable_tensor()->set_content(content);
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(parsed.value().tensor().content(), content);
}

TEST(EncodePullDenseResponse, HasTheSizeProtobufComputes) {
  const std::string content = "abc";
  PullDenseResponse expected = Header();
  expected.mutable_value()->mutable_tensor()->set_content(content);
  EXPECT_EQ(Flatten(EncodePullDenseResponse(Header(), content.data(),
                                            content.size()))
                .size(),
            expected.ByteSizeLong());
}

TEST(EncodePullDenseResponse, EmptyContentAndScalar) {
  PullDenseResponse header;
  header.mutable_value()->set_name("bias");
  header.mutable_value()->mutable_tensor()->set_dtype(DT_FLOAT);
  PullDenseResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(
      Flatten(EncodePullDenseResponse(header, nullptr, 0))));
  EXPECT_EQ(parsed.value().name(), "bias");
  EXPECT_EQ(parsed.value().tensor().dtype(), DT_FLOAT);
  EXPECT_TRUE(parsed.value().tensor().content().empty());
  EXPECT_TRUE(parsed.value().has_tensor());
}

TEST(EncodePushDenseRequest, ParsesAsTheMessageWithGradients) {
  PushDenseRequest header;
  header.mutable_header()->set_run_id("run");
  header.mutable_header()->set_request_id(7);
  header.set_version(3);
  header.set_batch_size(128);
  const PullDenseResponse pull = Header();
  NamedTensor a = pull.value();
  NamedTensor b = pull.value();
  b.set_name("other");
  b.mutable_tensor()->set_content_offset(0);
  const std::string ca(200000, 'a');
  const std::string cb = "bytes of b";
  const GradientChunk chunks[] = {{&a, ca.data(), static_cast<int64_t>(ca.size())},
                                  {&b, cb.data(), static_cast<int64_t>(cb.size())}};
  PushDenseRequest parsed;
  ASSERT_TRUE(
      parsed.ParseFromString(Flatten(EncodePushDenseRequest(header, chunks))));
  PushDenseRequest expected = header;
  *expected.add_gradients() = a;
  expected.mutable_gradients(0)->mutable_tensor()->set_content(ca);
  *expected.add_gradients() = b;
  expected.mutable_gradients(1)->mutable_tensor()->set_content(cb);
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(Flatten(EncodePushDenseRequest(header, chunks)).size(),
            expected.ByteSizeLong());
}

TEST(EncodePushDenseRequest, LentContentIsTheSameBytesNotCopied) {
  PushDenseRequest header;
  header.set_version(3);
  NamedTensor a = Header().value();
  NamedTensor b = a;
  b.set_name("small");
  const std::string ca(200000, 'a');  // lent
  const std::string cb = "bytes of b";   // copied: too small to lend
  const GradientChunk chunks[] = {{&a, ca.data(), static_cast<int64_t>(ca.size())},
                                  {&b, cb.data(), static_cast<int64_t>(cb.size())}};
  BorrowedContent borrowed;
  {
    const grpc::ByteBuffer lent = EncodePushDenseRequest(header, chunks, &borrowed);
    EXPECT_EQ(Flatten(lent), Flatten(EncodePushDenseRequest(header, chunks)));
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(lent.Dump(&slices).ok());
    bool points_at_content = false;
    for (const grpc::Slice& s : slices) {
      if (reinterpret_cast<const char*>(s.begin()) == ca.data()) {
        points_at_content = s.size() == ca.size();
      }
    }
    EXPECT_TRUE(points_at_content);
  }
  // Every slice is gone with the buffer: this returns at once.
  borrowed.WaitUntilReturned();
}

TEST(EncodePushDenseRequest, NoGradients) {
  PushDenseRequest header;
  header.set_version(5);
  PushDenseRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(EncodePushDenseRequest(header, {}))));
  EXPECT_EQ(parsed.version(), 5);
  EXPECT_EQ(parsed.gradients_size(), 0);
}

// The bytes of `message` cut into slices of `piece` bytes, as gRPC may
// deliver them.
std::vector<grpc::Slice> Cut(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    slices.emplace_back(bytes.data() + i, std::min(piece, bytes.size() - i));
  }
  return slices;
}

std::string Join(const PullDenseView& view) {
  std::string out;
  for (absl::string_view piece : view.content) {
    out.append(piece.data(), piece.size());
  }
  return out;
}

TEST(DecodePullDenseResponse, ReadsWhatProtobufWrites) {
  PullDenseResponse message = Header();
  std::string content(100000, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 13);
  message.mutable_value()->mutable_tensor()->set_content(content);
  const std::string bytes = message.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, bytes.size()}) {
    const std::vector<grpc::Slice> slices = Cut(bytes, piece);  // outlive view
    PullDenseView view;
    ASSERT_TRUE(DecodePullDenseResponse(slices, &view)) << piece;
    EXPECT_EQ(view.content_size, static_cast<int64_t>(content.size()));
    EXPECT_EQ(Join(view), content);
    EXPECT_EQ(view.header.SerializeAsString(), Header().SerializeAsString());
  }
}

TEST(DecodePullDenseResponse, MergesRepeatedMessagesLastContentWins) {
  PullDenseResponse first = Header();
  first.mutable_value()->mutable_tensor()->set_content("old");
  PullDenseResponse second;
  second.mutable_value()->mutable_tensor()->set_content("new");
  second.mutable_value()->mutable_tensor()->set_content_offset(9);
  const std::string bytes =
      first.SerializeAsString() + second.SerializeAsString();
  PullDenseResponse expected;
  ASSERT_TRUE(expected.ParseFromString(bytes));
  const std::vector<grpc::Slice> slices = Cut(bytes, 5);
  PullDenseView view;
  ASSERT_TRUE(DecodePullDenseResponse(slices, &view));
  EXPECT_EQ(Join(view), expected.value().tensor().content());
  expected.mutable_value()->mutable_tensor()->clear_content();
  EXPECT_EQ(view.header.SerializeAsString(), expected.SerializeAsString());
}

TEST(DecodePullDenseResponse, RefusesTruncatedBytes) {
  PullDenseResponse message = Header();
  message.mutable_value()->mutable_tensor()->set_content("content");
  const std::string bytes = message.SerializeAsString();
  PullDenseView view;
  EXPECT_FALSE(DecodePullDenseResponse(
      Cut(bytes.substr(0, bytes.size() - 1), 3), &view));
  EXPECT_FALSE(DecodePullDenseResponse(Cut("\xff\xff", 1), &view));
}

TEST(DecodePullDenseResponse, ReadsTheEncoder) {
  const std::string content = "0123456789";
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(EncodePullDenseResponse(Header(), content.data(), content.size())
                  .Dump(&slices)
                  .ok());
  PullDenseView view;
  ASSERT_TRUE(DecodePullDenseResponse(slices, &view));
  EXPECT_EQ(Join(view), content);
  EXPECT_EQ(view.header.version(), 42);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain

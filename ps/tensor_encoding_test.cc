#include "ps/tensor_encoding.h"

#include <memory>
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
  NamedTensor* value = header.add_values();
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

// One message of `header`'s values (content ignored) with `contents`.
grpc::ByteBuffer Encode(const PullDenseResponse& header,
                        const std::vector<std::string>& contents) {
  std::vector<grpc::Slice> values;
  for (int i = 0; i < header.values_size(); ++i) {
    values.push_back(EncodePullDenseValue(header.values(i), contents[i].data(),
                                          contents[i].size()));
  }
  return EncodePullDenseResponse(header, values);
}

// `header` with `contents` as its values' contents.
PullDenseResponse WithContents(PullDenseResponse header,
                               const std::vector<std::string>& contents) {
  for (int i = 0; i < header.values_size(); ++i) {
    header.mutable_values(i)->mutable_tensor()->set_content(contents[i]);
  }
  return header;
}

// Header() with a second, small value of another variable.
PullDenseResponse TwoValues() {
  PullDenseResponse header = Header();
  NamedTensor* bias = header.add_values();
  bias->set_name("dense/bias");
  bias->mutable_tensor()->set_dtype(DT_FLOAT);
  bias->mutable_tensor()->mutable_shape()->add_dims(64);
  return header;
}

TEST(EncodePullDenseResponse, ParsesAsTheMessageWithContent) {
  // Large enough that every length takes a multi-byte varint.
  std::string content(300000, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 7);
  const PullDenseResponse header = Header();
  PullDenseResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(Encode(header, {content}))));
  const PullDenseResponse expected = WithContents(header, {content});
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(parsed.values(0).tensor().content(), content);
}

TEST(EncodePullDenseResponse, SeveralValuesInOrder) {
  const std::vector<std::string> contents = {std::string(200000, 'k'),
                                             "bias bytes"};
  PullDenseResponse parsed;
  ASSERT_TRUE(
      parsed.ParseFromString(Flatten(Encode(TwoValues(), contents))));
  EXPECT_EQ(parsed.SerializeAsString(),
            WithContents(TwoValues(), contents).SerializeAsString());
  ASSERT_EQ(parsed.values_size(), 2);
  EXPECT_EQ(parsed.values(1).name(), "dense/bias");
  EXPECT_EQ(parsed.version(), 42);
}

TEST(EncodePullDenseResponse, HasTheSizeProtobufComputes) {
  const std::vector<std::string> contents = {"abc", "de"};
  EXPECT_EQ(Flatten(Encode(TwoValues(), contents)).size(),
            WithContents(TwoValues(), contents).ByteSizeLong());
}

TEST(EncodePullDenseResponse, EmptyContentAndScalar) {
  PullDenseResponse header;
  header.add_values()->set_name("bias");
  header.mutable_values(0)->mutable_tensor()->set_dtype(DT_FLOAT);
  PullDenseResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(Encode(header, {""}))));
  ASSERT_EQ(parsed.values_size(), 1);
  EXPECT_EQ(parsed.values(0).name(), "bias");
  EXPECT_EQ(parsed.values(0).tensor().dtype(), DT_FLOAT);
  EXPECT_TRUE(parsed.values(0).tensor().content().empty());
  EXPECT_TRUE(parsed.values(0).has_tensor());
}

TEST(LendPullDenseValue, WritesWhatEncodeWritesAndHoldsTheOwner) {
  const PullDenseResponse header = TwoValues();
  auto big = std::make_shared<std::string>(200000, 'w');  // lent
  auto small = std::make_shared<std::string>("bias");     // copied
  std::weak_ptr<std::string> watch = big;
  {
    std::vector<grpc::Slice> values;
    LendPullDenseValue(header.values(0), big->data(), big->size(), big,
                       &values);
    LendPullDenseValue(header.values(1), small->data(), small->size(), small,
                       &values);
    const grpc::ByteBuffer lent = EncodePullDenseResponse(header, values);
    EXPECT_EQ(Flatten(lent), Flatten(Encode(header, {*big, *small})));
    bool points_at_content = false;
    for (const grpc::Slice& s : values) {
      points_at_content |=
          reinterpret_cast<const char*>(s.begin()) == big->data();
    }
    EXPECT_TRUE(points_at_content);
    big.reset();
    EXPECT_FALSE(watch.expired());  // the slices hold it
  }
  EXPECT_TRUE(watch.expired());
}

TEST(EncodePushDenseRequest, ParsesAsTheMessageWithGradients) {
  PushDenseRequest header;
  header.mutable_header()->set_run_id("run");
  header.mutable_header()->set_request_id(7);
  header.set_version(3);
  header.set_batch_size(128);
  const PullDenseResponse pull = Header();
  NamedTensor a = pull.values(0);
  NamedTensor b = pull.values(0);
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
  NamedTensor a = Header().values(0);
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

template <typename Message>
std::string Join(const DenseView<Message>& view, int i) {
  std::string out;
  for (absl::string_view piece : view.Content(i)) {
    out.append(piece.data(), piece.size());
  }
  return out;
}

// `message` less its values' contents.
PullDenseResponse WithoutContents(PullDenseResponse message) {
  for (NamedTensor& value : *message.mutable_values()) {
    value.mutable_tensor()->clear_content();
  }
  return message;
}

TEST(DecodePullDenseResponse, ReadsWhatProtobufWrites) {
  std::string content(100000, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 13);
  const PullDenseResponse message = WithContents(TwoValues(), {content, "bias"});
  const std::string bytes = message.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, bytes.size()}) {
    const std::vector<grpc::Slice> slices = Cut(bytes, piece);  // outlive view
    PullDenseView view;
    ASSERT_TRUE(DecodePullDenseResponse(slices, &view)) << piece;
    ASSERT_EQ(view.header.values_size(), 2);
    EXPECT_EQ(view.ContentSize(0), static_cast<int64_t>(content.size()));
    EXPECT_EQ(Join(view, 0), content);
    EXPECT_EQ(view.ContentSize(1), 4);
    EXPECT_EQ(Join(view, 1), "bias");
    EXPECT_EQ(view.header.SerializeAsString(), TwoValues().SerializeAsString());
  }
}

TEST(DecodePullDenseResponse, MergesRepeatedTensorsLastContentWins) {
  // Within one value, a second `tensor` merges into the first and its
  // content replaces the first's, as protobuf's parser does.
  NamedTensor first = Header().values(0);
  first.mutable_tensor()->set_content("old");
  NamedTensor second;
  second.mutable_tensor()->set_content("new");
  second.mutable_tensor()->set_content_offset(9);
  const std::string value_bytes =
      first.SerializeAsString() + second.SerializeAsString();
  std::string bytes;
  bytes.push_back(static_cast<char>(
      (PullDenseResponse::kValuesFieldNumber << 3) | 2));
  ASSERT_LT(value_bytes.size(), 128u);
  bytes.push_back(static_cast<char>(value_bytes.size()));
  bytes += value_bytes;
  PullDenseResponse other = TwoValues();  // appends a value and the version
  other.mutable_values()->DeleteSubrange(0, 1);
  other.mutable_values(0)->mutable_tensor()->set_content("b");
  bytes += other.SerializeAsString();
  PullDenseResponse expected;
  ASSERT_TRUE(expected.ParseFromString(bytes));
  ASSERT_EQ(expected.values_size(), 2);
  const std::vector<grpc::Slice> slices = Cut(bytes, 5);
  PullDenseView view;
  ASSERT_TRUE(DecodePullDenseResponse(slices, &view));
  ASSERT_EQ(view.header.values_size(), 2);
  EXPECT_EQ(Join(view, 0), expected.values(0).tensor().content());
  EXPECT_EQ(Join(view, 0), "new");
  EXPECT_EQ(Join(view, 1), "b");
  EXPECT_EQ(view.header.SerializeAsString(),
            WithoutContents(expected).SerializeAsString());
}

TEST(DecodePullDenseResponse, RefusesTruncatedBytes) {
  const PullDenseResponse message = WithContents(TwoValues(), {"content", "b"});
  const std::string bytes = message.SerializeAsString();
  PullDenseView view;
  EXPECT_FALSE(DecodePullDenseResponse(
      Cut(bytes.substr(0, bytes.size() - 1), 3), &view));
  EXPECT_FALSE(DecodePullDenseResponse(Cut("\xff\xff", 1), &view));
}

TEST(DecodePullDenseResponse, ReadsTheEncoder) {
  const std::vector<std::string> contents = {"0123456789", ""};
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(Encode(TwoValues(), contents).Dump(&slices).ok());
  PullDenseView view;
  ASSERT_TRUE(DecodePullDenseResponse(slices, &view));
  ASSERT_EQ(view.header.values_size(), 2);
  EXPECT_EQ(Join(view, 0), contents[0]);
  EXPECT_EQ(Join(view, 1), contents[1]);
  EXPECT_EQ(view.ContentSize(1), 0);
  EXPECT_EQ(view.header.version(), 42);
  EXPECT_EQ(view.header.SerializeAsString(), TwoValues().SerializeAsString());
}

TEST(DecodePullDenseResponse, NoValues) {
  PullDenseResponse message;
  message.set_version(7);
  const std::string bytes = message.SerializeAsString();
  PullDenseView view;
  ASSERT_TRUE(DecodePullDenseResponse(Cut(bytes, 1), &view));
  EXPECT_EQ(view.header.values_size(), 0);
  EXPECT_TRUE(view.contents.empty());
  EXPECT_EQ(view.header.version(), 7);
}

TEST(DecodePushDenseRequest, ReadsWhatProtobufWrites) {
  PushDenseRequest message;
  message.mutable_header()->set_run_id("run");
  message.mutable_header()->set_request_id(77);
  message.set_version(3);
  message.set_batch_size(64);
  *message.mutable_gradients() =
      WithContents(TwoValues(), {std::string(5000, 'x'), "bias"}).values();
  PushDenseRequest without = message;
  for (NamedTensor& g : *without.mutable_gradients()) {
    g.mutable_tensor()->clear_content();
  }
  const std::string bytes = message.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{7}, bytes.size()}) {
    const std::vector<grpc::Slice> slices = Cut(bytes, piece);  // outlive view
    PushDenseView view;
    ASSERT_TRUE(DecodePushDenseRequest(slices, &view)) << piece;
    ASSERT_EQ(view.header.gradients_size(), 2);
    EXPECT_EQ(view.header.SerializeAsString(), without.SerializeAsString());
    for (int i = 0; i < 2; ++i) {
      const std::string& content = message.gradients(i).tensor().content();
      EXPECT_EQ(Join(view, i), content);
      EXPECT_EQ(view.ContentSize(i), static_cast<int64_t>(content.size()));
    }
  }
  PushDenseView view;
  EXPECT_FALSE(DecodePushDenseRequest(
      Cut(bytes.substr(0, bytes.size() - 1), 3), &view));
}

}  // namespace
}  // namespace ps
}  // namespace pstrain

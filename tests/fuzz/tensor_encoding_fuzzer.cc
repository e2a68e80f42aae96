// Fuzzes the hand-written protobuf coding of ps/tensor_encoding.h, which
// the worker uses to read every pull reply and the ps to write them (and the
// worker to write its pushes, the ps to read them). Input: a byte choosing how the bytes are cut into
// slices (as gRPC may deliver them: 0 whole, else pieces of that many bytes),
// then the bytes. Checks, against protobuf's own parser:
//   - DecodePullDenseResponse and DecodePushDenseRequest accept only what
//     protobuf accepts, and read the same message;
//   - EncodePullDenseResponse (of EncodePullDenseValue slices) and
//     EncodePushDenseRequest of any message that parses write bytes protobuf
//     reads back as that message, and that the decoder reads back too,
//     unless the message holds groups: the decoder
//     refuses those (proto3 never writes them; protobuf still reads them as
//     unknown fields).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/unknown_field_set.h"
#include "google/protobuf/util/message_differencer.h"
#include "ps/tensor_encoding.h"
#include "tests/fuzz/fuzz_util.h"

namespace pstrain {
namespace ps {
namespace {

using google::protobuf::util::MessageDifferencer;

std::vector<grpc::Slice> Cut(absl::string_view bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  if (piece == 0) piece = std::max<size_t>(bytes.size(), 1);
  for (size_t i = 0; i < bytes.size(); i += piece) {
    slices.emplace_back(bytes.data() + i, std::min(piece, bytes.size() - i));
  }
  return slices;
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Valid()) return out;
  PSTRAIN_FUZZ_EXPECT(buffer.Dump(&slices).ok(), "Dump");
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

// The dense tensors of each message.
google::protobuf::RepeatedPtrField<NamedTensor>* Tensors(PullDenseResponse* m) {
  return m->mutable_values();
}
google::protobuf::RepeatedPtrField<NamedTensor>* Tensors(PushDenseRequest* m) {
  return m->mutable_gradients();
}

// The message `view` holds: its header with the contents put back.
template <typename Message>
Message Assemble(const DenseView<Message>& view) {
  Message message = view.header;
  auto* tensors = Tensors(&message);
  PSTRAIN_FUZZ_EXPECT(view.contents.size() == static_cast<size_t>(tensors->size()),
                      view.contents.size(), " contents for ", tensors->size(),
                      " tensors");
  for (int i = 0; i < tensors->size(); ++i) {
    std::string content;
    for (absl::string_view piece : view.Content(i)) {
      content.append(piece.data(), piece.size());
    }
    PSTRAIN_FUZZ_EXPECT(
        static_cast<int64_t>(content.size()) == view.ContentSize(i),
        content.size(), " content bytes, content size ", view.ContentSize(i));
    if (!content.empty()) {
      tensors->Mutable(i)->mutable_tensor()->set_content(content);
    }
  }
  return message;
}

void ExpectEqual(const google::protobuf::Message& expected,
                 const google::protobuf::Message& actual,
                 absl::string_view what) {
  PSTRAIN_FUZZ_EXPECT(MessageDifferencer::Equals(expected, actual), what,
                      ": expected ", expected.ShortDebugString(), ", got ",
                      actual.ShortDebugString());
}

// The decoder and the encoders always make each tensor's `tensor` present
// (an empty message on the wire): drop it from `other` where `expected` has
// none, which is the same message to every reader.
template <typename Message>
void MatchPresence(Message expected, Message* other) {
  auto* want = Tensors(&expected);
  auto* got = Tensors(other);
  for (int i = 0; i < want->size() && i < got->size(); ++i) {
    NamedTensor* value = got->Mutable(i);
    if (!want->Get(i).has_tensor() && value->has_tensor() &&
        value->tensor().ByteSizeLong() == 0) {
      value->clear_tensor();
    }
  }
}

// Whether `message` or a message in it has a group among its unknown fields.
bool HasGroups(const google::protobuf::Message& message) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  const google::protobuf::UnknownFieldSet& unknown =
      reflection->GetUnknownFields(message);
  for (int i = 0; i < unknown.field_count(); ++i) {
    if (unknown.field(i).type() == google::protobuf::UnknownField::TYPE_GROUP) {
      return true;
    }
  }
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->cpp_type() !=
        google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      continue;
    }
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        if (HasGroups(reflection->GetRepeatedMessage(message, field, i))) {
          return true;
        }
      }
    } else if (HasGroups(reflection->GetMessage(message, field))) {
      return true;
    }
  }
  return false;
}

bool Decode(const std::vector<grpc::Slice>& slices, PullDenseView* view) {
  return DecodePullDenseResponse(slices, view);
}
bool Decode(const std::vector<grpc::Slice>& slices, PushDenseView* view) {
  return DecodePushDenseRequest(slices, view);
}

// Decodes `bytes` cut every `piece` bytes. What the decoder accepts,
// protobuf must have parsed (`parses`) as `parsed`; `must`: the decoder
// must accept it.
template <typename Message>
void CheckDecode(absl::string_view bytes, size_t piece, const Message& parsed,
                 bool parses, bool must, absl::string_view what) {
  const std::vector<grpc::Slice> slices = Cut(bytes, piece);
  DenseView<Message> view;
  const bool decoded = Decode(slices, &view);
  PSTRAIN_FUZZ_EXPECT(decoded || !must, "the decoder refuses ", what);
  if (!decoded) return;
  PSTRAIN_FUZZ_EXPECT(parses, "decoded ", what, ", which protobuf refuses");
  Message message = Assemble(view);
  MatchPresence(parsed, &message);
  ExpectEqual(parsed, message, absl::StrCat(what, " decoded"));
}

void CheckPull(absl::string_view bytes, size_t piece) {
  PullDenseResponse parsed;
  const bool parses =
      parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  CheckDecode(bytes, piece, parsed, parses, /*must=*/false, "pull bytes");
  if (!parses) return;
  // What the ps writes for this message, read by protobuf and the decoder.
  PullDenseResponse header = parsed;
  std::vector<grpc::Slice> values;
  for (NamedTensor& value : *header.mutable_values()) {
    const std::string content = value.tensor().content();
    value.mutable_tensor()->clear_content();
    values.push_back(
        EncodePullDenseValue(value, content.data(), content.size()));
  }
  const std::string encoded = Flatten(EncodePullDenseResponse(header, values));
  PullDenseResponse reparsed;
  PSTRAIN_FUZZ_EXPECT(
      reparsed.ParseFromArray(encoded.data(), static_cast<int>(encoded.size())),
      "protobuf refuses the encoding");
  MatchPresence(parsed, &reparsed);
  ExpectEqual(parsed, reparsed, "encoded and parsed");
  if (HasGroups(parsed)) return;
  CheckDecode(encoded, piece, parsed, true, /*must=*/true, "the pull encoding");
}

void CheckPush(absl::string_view bytes, size_t piece) {
  PushDenseRequest parsed;
  const bool parses =
      parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  CheckDecode(bytes, piece, parsed, parses, /*must=*/false, "push bytes");
  if (!parses) return;
  std::vector<NamedTensor> gradients(parsed.gradients().begin(),
                                     parsed.gradients().end());
  std::vector<GradientChunk> chunks;
  for (const NamedTensor& g : gradients) {
    const std::string& content = g.tensor().content();
    chunks.push_back(GradientChunk{&g, content.data(),
                                   static_cast<int64_t>(content.size())});
  }
  const std::string encoded = Flatten(EncodePushDenseRequest(parsed, chunks));
  PushDenseRequest reparsed;
  PSTRAIN_FUZZ_EXPECT(
      reparsed.ParseFromArray(encoded.data(), static_cast<int>(encoded.size())),
      "protobuf refuses the push encoding");
  MatchPresence(parsed, &reparsed);
  ExpectEqual(parsed, reparsed, "push encoded and parsed");
  if (HasGroups(parsed)) return;
  CheckDecode(encoded, piece, parsed, true, /*must=*/true, "the push encoding");
}

}  // namespace
}  // namespace ps
}  // namespace pstrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pstrain::fuzz::FuzzReader in(data, size);
  const size_t piece = in.Byte();
  const absl::string_view bytes = in.Rest();
  pstrain::ps::CheckPull(bytes, piece);
  pstrain::ps::CheckPush(bytes, piece);
  return 0;
}

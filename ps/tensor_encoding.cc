#include "ps/tensor_encoding.h"

#include <algorithm>
#include <memory>
#include <cstring>
#include <string>
#include <vector>

#include "grpc/slice.h"
#include "grpcpp/support/slice.h"

// Why hand-encoding is valid protobuf. A message is a sequence of fields,
// each a tag (field number and wire type) and a value; a nested message or a
// bytes field is the tag, the body's length as a varint, and the body.
// Protobuf lets fields appear in any order (a parser keeps the last
// occurrence of a singular field; each occurs once here). So a message with
// one large `bytes content` field deep inside may be written as: the
// protobuf serialization of each enclosing message with its nested field
// cleared, followed by that nested field's tag and length, and so on down to
// the content's tag, length and bytes. Every other field, including fields
// added to these messages later, is written by protobuf itself. Only the
// nesting path (PullDenseResponse.values or PushDenseRequest.gradients ->
// NamedTensor.tensor -> TensorProto.content) is spelled out here, by field
// number constants from the generated code.

namespace pstrain {
namespace ps {
namespace {

// Appends `value` as a protobuf base-128 varint.
void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Appends the tag and length of length-delimited field `number` (wire type
// 2) whose body is `length` bytes.
void AppendBytesField(int number, uint64_t length, std::string* out) {
  AppendVarint((static_cast<uint64_t>(number) << 3) | 2, out);
  AppendVarint(length, out);
}

// Appends the bytes of `named` with tensor.content set to `size` bytes, up to
// (not including) those bytes: the NamedTensor is the appended part followed
// by the content.
void AppendNamedTensorPrefix(const NamedTensor& named, int64_t size,
                             std::string* out) {
  NamedTensor outer = named;
  outer.clear_tensor();
  TensorProto tensor = named.tensor();
  tensor.clear_content();

  std::string tensor_part;
  tensor.AppendToString(&tensor_part);
  AppendBytesField(TensorProto::kContentFieldNumber, size, &tensor_part);

  outer.AppendToString(out);
  AppendBytesField(NamedTensor::kTensorFieldNumber, tensor_part.size() + size,
                   out);
  out->append(tensor_part);
}

// Contents at least this large are lent rather than copied (copying a small
// one costs less than a slice of its own).
constexpr int64_t kMinLentBytes = 64 << 10;

// The bytes of `parts` in order (pairs of bytes and length, each marked
// whether it may be lent): one slice, or, with `borrowed`, runs of copied
// parts in one slice each between lent parts.
grpc::ByteBuffer Concatenate(
    const std::vector<std::pair<const char*, int64_t>>& parts,
    const std::vector<bool>& lendable, BorrowedContent* borrowed) {
  std::vector<grpc::Slice> slices;
  size_t i = 0;
  while (i < parts.size()) {
    if (borrowed != nullptr && lendable[i] && parts[i].second >= kMinLentBytes) {
      slices.push_back(borrowed->Lend(parts[i].first, parts[i].second));
      ++i;
      continue;
    }
    // Copy parts up to the next lent one into one slice.
    size_t end = i;
    int64_t total = 0;
    while (end < parts.size() &&
           !(borrowed != nullptr && lendable[end] &&
             parts[end].second >= kMinLentBytes)) {
      total += parts[end++].second;
    }
    grpc_slice slice = grpc_slice_malloc(total);
    char* out = reinterpret_cast<char*>(GRPC_SLICE_START_PTR(slice));
    for (; i < end; ++i) {
      if (parts[i].second > 0) std::memcpy(out, parts[i].first, parts[i].second);
      out += parts[i].second;
    }
    slices.emplace_back(slice, grpc::Slice::STEAL_REF);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Reads protobuf wire format from a sequence of slices.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices)
      : slices_(slices) {
    for (const grpc::Slice& s : slices) size_ += s.size();
  }

  int64_t position() const { return position_; }
  int64_t size() const { return size_; }

  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      char byte;
      if (!Read(1, [&](const char* p, size_t) { byte = *p; })) return false;
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  // Calls fn(data, size) for the pieces of the next n bytes and moves past
  // them; false (nothing consumed) if fewer than n bytes remain.
  template <typename Fn>
  bool Read(int64_t n, Fn fn) {
    if (n < 0 || n > size_ - position_) return false;
    position_ += n;
    while (n > 0) {
      const grpc::Slice& s = slices_[slice_];
      const size_t take = std::min<size_t>(n, s.size() - offset_);
      fn(reinterpret_cast<const char*>(s.begin()) + offset_, take);
      offset_ += take;
      n -= take;
      if (offset_ == s.size()) {
        ++slice_;
        offset_ = 0;
      }
    }
    return true;
  }

 private:
  const std::vector<grpc::Slice>& slices_;
  int64_t size_ = 0;
  int64_t position_ = 0;
  size_t slice_ = 0;   // current slice
  size_t offset_ = 0;  // in it
};

// The repeated field of dense tensors in each message, and adding one.
constexpr int TensorsField(const PullDenseResponse*) {
  return PullDenseResponse::kValuesFieldNumber;
}
constexpr int TensorsField(const PushDenseRequest*) {
  return PushDenseRequest::kGradientsFieldNumber;
}
NamedTensor* AddTensor(PullDenseResponse* m) { return m->add_values(); }
NamedTensor* AddTensor(PushDenseRequest* m) { return m->add_gradients(); }

// Decoding follows the same path: level 0 is the message, 1 one of its
// NamedTensors (`values` or `gradients`), 2 that one's `tensor`
// TensorProto. Every field off the path to the content is copied, as it is
// on the wire, into rest[level] and parsed by protobuf afterwards. Each
// occurrence of the repeated field is a new element; within one, a repeated
// occurrence of `tensor` is merged, and the last `content` wins, as
// protobuf's parser does.
template <typename Message>
bool DecodeLevel(SliceReader* in, int64_t end, int level, std::string rest[3],
                 DenseView<Message>* view) {
  static constexpr int kPath[] = {TensorsField(static_cast<Message*>(nullptr)),
                                  NamedTensor::kTensorFieldNumber,
                                  TensorProto::kContentFieldNumber};
  auto append = [&rest, level](const char* p, size_t n) {
    rest[level].append(p, n);
  };
  while (in->position() < end) {
    uint64_t tag = 0;
    const int64_t tag_start = in->position();
    if (!in->ReadVarint(&tag)) return false;
    // As protobuf reads them: a tag is at most 5 bytes and 32 bits (longer
    // ones would be re-encoded below as another field).
    if (tag > 0xffffffffu || in->position() - tag_start > 5) return false;
    const uint64_t number = tag >> 3;
    const int wire_type = tag & 7;
    if (wire_type == 2 && number == static_cast<uint64_t>(kPath[level])) {
      uint64_t length = 0;
      if (!in->ReadVarint(&length) ||
          length > static_cast<uint64_t>(end - in->position())) {
        return false;
      }
      if (level == 0) {
        // A new tensor: its fields are collected afresh and
        // parsed once it ends.
        rest[1].clear();
        rest[2].clear();
        auto& content = view->contents.emplace_back();
        content.first_piece = view->pieces.size();
        if (!DecodeLevel(in, in->position() + length, 1, rest, view)) {
          return false;
        }
        NamedTensor* value = AddTensor(&view->header);
        if (!value->ParseFromString(rest[1]) ||
            !value->mutable_tensor()->MergeFromString(rest[2])) {
          return false;
        }
        continue;
      }
      if (level == 1) {
        if (!DecodeLevel(in, in->position() + length, 2, rest, view)) {
          return false;
        }
        continue;
      }
      // The current element's pieces are the last ones: a later content
      // replaces them.
      auto& content = view->contents.back();
      view->pieces.resize(content.first_piece);
      content.num_pieces = 0;
      content.size = length;
      if (!in->Read(length, [view, &content](const char* p, size_t n) {
            view->pieces.emplace_back(p, n);
            ++content.num_pieces;
          })) {
        return false;
      }
      continue;
    }
    AppendVarint(tag, &rest[level]);
    uint64_t value = 0;
    switch (wire_type) {
      case 0:  // varint
        if (!in->ReadVarint(&value)) return false;
        AppendVarint(value, &rest[level]);
        break;
      case 1:  // fixed64
        if (!in->Read(8, append)) return false;
        break;
      case 2:  // length-delimited
        if (!in->ReadVarint(&value) ||
            value > static_cast<uint64_t>(end - in->position())) {
          return false;
        }
        AppendVarint(value, &rest[level]);
        if (!in->Read(value, append)) return false;
        break;
      case 5:  // fixed32
        if (!in->Read(4, append)) return false;
        break;
      default:  // groups (unused by proto3) or invalid
        return false;
    }
  }
  return in->position() == end;
}

template <typename Message>
bool Decode(const std::vector<grpc::Slice>& slices, DenseView<Message>* view) {
  view->header.Clear();
  view->contents.clear();
  view->pieces.clear();
  SliceReader in(slices);
  std::string rest[3];
  if (!DecodeLevel(&in, in.size(), 0, rest, view)) return false;
  // rest[0] holds none of the tensors (they were parsed above): merging
  // keeps them.
  return view->header.MergeFromString(rest[0]);
}

}  // namespace

bool DecodePullDenseResponse(const std::vector<grpc::Slice>& slices,
                             PullDenseView* view) {
  return Decode(slices, view);
}

bool DecodePushDenseRequest(const std::vector<grpc::Slice>& slices,
                            PushDenseView* view) {
  return Decode(slices, view);
}
namespace {

// The bytes of one PullDenseResponse.values element up to its content:
//   [values tag, length] [NamedTensor prefix]
std::string PullDenseValuePrefix(const NamedTensor& value, int64_t size) {
  std::string named_prefix;
  AppendNamedTensorPrefix(value, size, &named_prefix);
  std::string prefix;
  AppendBytesField(PullDenseResponse::kValuesFieldNumber,
                   named_prefix.size() + size, &prefix);
  prefix.append(named_prefix);
  return prefix;
}

void ReleaseOwner(void* owner) {
  delete static_cast<std::shared_ptr<const void>*>(owner);
}

}  // namespace

grpc::Slice EncodePullDenseValue(const NamedTensor& value, const char* content,
                                 int64_t size) {
  const std::string prefix = PullDenseValuePrefix(value, size);
  grpc_slice slice = grpc_slice_malloc(prefix.size() + size);
  char* out = reinterpret_cast<char*>(GRPC_SLICE_START_PTR(slice));
  std::memcpy(out, prefix.data(), prefix.size());
  if (size > 0) std::memcpy(out + prefix.size(), content, size);
  return grpc::Slice(slice, grpc::Slice::STEAL_REF);
}

void LendPullDenseValue(const NamedTensor& value, const char* content,
                        int64_t size, std::shared_ptr<const void> owner,
                        std::vector<grpc::Slice>* out) {
  if (size < kMinLentBytes) {
    out->push_back(EncodePullDenseValue(value, content, size));
    return;
  }
  out->emplace_back(PullDenseValuePrefix(value, size));
  // gRPC never writes through a slice it sends.
  out->emplace_back(
      grpc_slice_new_with_user_data(
          const_cast<char*>(content), size, &ReleaseOwner,
          new std::shared_ptr<const void>(std::move(owner))),
      grpc::Slice::STEAL_REF);
}

grpc::ByteBuffer EncodePullDenseResponse(const PullDenseResponse& header,
                                         absl::Span<const grpc::Slice> values) {
  //   [header without values] [value 0] [value 1] ...
  PullDenseResponse outer = header;
  outer.clear_values();
  std::vector<grpc::Slice> slices;
  slices.reserve(values.size() + 1);
  const std::string prefix = outer.SerializeAsString();
  if (!prefix.empty()) slices.emplace_back(prefix);
  slices.insert(slices.end(), values.begin(), values.end());
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::Slice BorrowedContent::Lend(const char* data, size_t size) {
  {
    absl::MutexLock lock(&mu_);
    ++lent_;
  }
  // gRPC never writes through a slice it sends.
  return grpc::Slice(grpc_slice_new_with_user_data(const_cast<char*>(data),
                                                   size, &Return, this),
                     grpc::Slice::STEAL_REF);
}

void BorrowedContent::Return(void* self) {
  BorrowedContent* borrowed = static_cast<BorrowedContent*>(self);
  absl::MutexLock lock(&borrowed->mu_);
  --borrowed->lent_;
}

void BorrowedContent::WaitUntilReturned() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int64_t* lent) { return *lent == 0; }, &lent_));
}

grpc::ByteBuffer EncodePushDenseRequest(
    const PushDenseRequest& header, absl::Span<const GradientChunk> gradients,
    BorrowedContent* borrowed) {
  //   [header without gradients]
  //   then per gradient: [gradients tag, length] [NamedTensor prefix] content
  PushDenseRequest outer = header;
  outer.clear_gradients();
  std::vector<std::string> prefixes(std::max<size_t>(gradients.size(), 1));
  outer.AppendToString(&prefixes[0]);
  std::vector<std::pair<const char*, int64_t>> parts;
  std::vector<bool> lendable;
  for (size_t i = 0; i < gradients.size(); ++i) {
    std::string named_prefix;
    AppendNamedTensorPrefix(*gradients[i].gradient, gradients[i].size,
                            &named_prefix);
    // Part i: [header or nothing] [gradients tag, length] [prefix]; the
    // gradient's content follows it.
    AppendBytesField(PushDenseRequest::kGradientsFieldNumber,
                     named_prefix.size() + gradients[i].size, &prefixes[i]);
    prefixes[i].append(named_prefix);
  }
  if (gradients.empty()) {
    parts.push_back({prefixes[0].data(),
                     static_cast<int64_t>(prefixes[0].size())});
    lendable.push_back(false);
  }
  for (size_t i = 0; i < gradients.size(); ++i) {
    parts.push_back({prefixes[i].data(),
                     static_cast<int64_t>(prefixes[i].size())});
    lendable.push_back(false);
    parts.push_back({gradients[i].content, gradients[i].size});
    lendable.push_back(true);
  }
  return Concatenate(parts, lendable, borrowed);
}

}  // namespace ps
}  // namespace pstrain

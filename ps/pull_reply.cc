#include "ps/pull_reply.h"

#include <algorithm>
#include <utility>

#include "ps/tensor_encoding.h"

namespace pstrain {
namespace ps {

NamedTensor PullHeader(const DenseVariable& v, const DensePart* part) {
  NamedTensor header;
  header.set_name(v.name());
  TensorProto* t = header.mutable_tensor();
  t->set_dtype(DT_FLOAT);
  if (part != nullptr) {
    for (int64_t d : PartShape(v.def(), *part)) t->mutable_shape()->add_dims(d);
    const PartRows rows =
        PartRowsOnPiece(*part, v.def(), v.row_begin(), v.row_end());
    t->mutable_slice()->set_begin(rows.begin);
    t->mutable_slice()->set_end(rows.end);
    return header;
  }
  *t->mutable_shape() = v.def().shape();
  if (v.def().shape().dims_size() > 0) {
    t->mutable_slice()->set_begin(v.row_begin());
    t->mutable_slice()->set_end(v.row_end());
  }
  return header;
}

void PullReply::Add(NamedTensor header, const ValueView& value) {
  const int64_t size = value.size;
  if (!pending_.empty() &&
      (value.version != pending_version_ || size > room_)) {
    Flush();
  }
  pending_version_ = value.version;
  TensorProto* t = header.mutable_tensor();
  int64_t offset = 0;
  do {
    if (room_ == 0) Flush();
    const int64_t n = std::min(room_, size - offset);
    t->set_content_offset(offset);
    if (value.owner != nullptr) {
      LendPullDenseValue(header, value.data + offset, n, value.owner,
                         &pending_);
    } else {
      pending_.push_back(EncodePullDenseValue(header, value.data + offset, n));
    }
    offset += n;
    room_ -= n;
  } while (offset < size);
}

std::vector<grpc::ByteBuffer> PullReply::Finish() {
  Flush();
  return std::move(messages_);
}

void PullReply::Flush() {
  if (!pending_.empty()) {
    PullDenseResponse header;
    header.set_version(pending_version_);
    messages_.push_back(EncodePullDenseResponse(header, pending_));
    pending_.clear();
  }
  room_ = chunk_;
}

}  // namespace ps
}  // namespace pstrain

// A dense tensor message (PullDenseResponse or PushDenseRequest) read from
// its serialized bytes with its tensor contents left in place: `header`
// holds every field but the contents of its tensors; the bytes of tensor i's
// content are Content(i), in order, ContentSize(i) in all. The pieces are
// views into the buffers the message arrived in (gRPC's slices) and valid
// while those live. This saves parsing each content into a string only to
// copy it again where it goes. ps/tensor_encoding.h decodes into it.
#ifndef PSTRAIN_PS_DENSE_VIEW_H_
#define PSTRAIN_PS_DENSE_VIEW_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/ps_service.pb.h"

namespace pstrain {
namespace ps {

template <typename Message>
struct DenseView {
  // Where one tensor's content lies in `pieces`.
  struct TensorContent {
    size_t first_piece = 0;
    size_t num_pieces = 0;
    int64_t size = 0;
  };

  absl::Span<const absl::string_view> Content(int i) const {
    return absl::MakeConstSpan(pieces).subspan(contents[i].first_piece,
                                               contents[i].num_pieces);
  }
  int64_t ContentSize(int i) const { return contents[i].size; }

  // Its tensors are PullDenseResponse.values or PushDenseRequest.gradients.
  Message header;
  std::vector<TensorContent> contents;  // one per tensor
  std::vector<absl::string_view> pieces;
};

using PullDenseView = DenseView<PullDenseResponse>;
using PushDenseView = DenseView<PushDenseRequest>;

// A view of `message`, parsed as usual: its header is a copy without the
// contents, which stay in `message` (it must outlive the view).
PushDenseView ViewOf(const PushDenseRequest& message);

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_DENSE_VIEW_H_

#include "ps/dense_view.h"

namespace pstrain {
namespace ps {

PushDenseView ViewOf(const PushDenseRequest& message) {
  PushDenseView view;
  view.header = message;
  for (int i = 0; i < message.gradients_size(); ++i) {
    view.header.mutable_gradients(i)->mutable_tensor()->clear_content();
    const std::string& content = message.gradients(i).tensor().content();
    view.contents.push_back(
        {view.pieces.size(), 1, static_cast<int64_t>(content.size())});
    view.pieces.push_back(content);
  }
  return view;
}

}  // namespace ps
}  // namespace pstrain

#include "ps/dense_view_testing.h"

#include <algorithm>
#include <cstring>

namespace pstrain {
namespace ps {

PushDenseView CutContents(const PushDenseRequest& message, size_t cut,
                          std::string* storage) {
  PushDenseView view = ViewOf(message);
  size_t at = 1;  // odd: no float is aligned
  for (const NamedTensor& g : message.gradients()) {
    at += g.tensor().content().size();
  }
  storage->assign(at, '\0');
  at = 1;
  view.pieces.clear();
  for (int i = 0; i < message.gradients_size(); ++i) {
    const std::string& content = message.gradients(i).tensor().content();
    std::memcpy(storage->data() + at, content.data(), content.size());
    view.contents[i] = {view.pieces.size(), 0,
                        static_cast<int64_t>(content.size())};
    for (size_t j = 0; j < content.size(); j += cut) {
      view.pieces.emplace_back(storage->data() + at + j,
                               std::min(cut, content.size() - j));
      ++view.contents[i].num_pieces;
    }
    at += content.size();
  }
  return view;
}

}  // namespace ps
}  // namespace pstrain

// For tests: push views whose gradients lie as gRPC may deliver them.
#ifndef PSTRAIN_PS_DENSE_VIEW_TESTING_H_
#define PSTRAIN_PS_DENSE_VIEW_TESTING_H_

#include <cstddef>
#include <string>

#include "ps/dense_view.h"

namespace pstrain {
namespace ps {

// A view of `message` whose gradients' contents are copied to odd addresses
// in *storage (which must outlive the view) and cut every `cut` bytes.
PushDenseView CutContents(const PushDenseRequest& message, size_t cut,
                          std::string* storage);

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_DENSE_VIEW_TESTING_H_

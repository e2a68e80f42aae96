#include "data/fashion_mnist_test_util.h"

#include <unistd.h>

#include <numeric>

#include "absl/types/span.h"
#include "data/idx_reader.h"

namespace pstrain {
namespace data {
namespace testing {

absl::StatusOr<Dataset> ReadFashionMnist(const std::string& prefix) {
  const std::string dir = kFashionMnistDir;
  const std::string images = dir + prefix + "-images-idx3-ubyte.gz";
  const std::string labels = dir + prefix + "-labels-idx1-ubyte.gz";
  if (access(images.c_str(), R_OK) != 0 || access(labels.c_str(), R_OK) != 0) {
    return absl::NotFoundError("Fashion-MNIST is not installed: no readable " +
                               images + " and " + labels);
  }
  return ReadIdx(images, labels);
}

void GatherExamples(const Dataset& dataset, int64_t begin, int64_t n,
                    std::vector<float>* features,
                    std::vector<int32_t>* labels) {
  std::vector<int64_t> indices(n);
  std::iota(indices.begin(), indices.end(), begin);
  features->resize(n * dataset.features.row_elements());
  GatherFeatures(dataset, indices, absl::MakeSpan(*features));
  labels->assign(dataset.labels.begin() + begin,
                 dataset.labels.begin() + begin + n);
}

}  // namespace testing
}  // namespace data
}  // namespace pstrain

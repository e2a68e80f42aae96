// Test helpers for tests that learn from the real Fashion-MNIST files
// (Debian's dataset-fashion-mnist): reading a split, or saying why it cannot
// be read, and taking consecutive examples as float rows and labels.
//
//   absl::StatusOr<Dataset> train = testing::ReadFashionMnist("train");
//   if (absl::IsNotFound(train.status())) GTEST_SKIP() << train.status();
//   testing::GatherExamples(*train, 0, 32, &features, &labels);
#ifndef PSTRAIN_DATA_FASHION_MNIST_TEST_UTIL_H_
#define PSTRAIN_DATA_FASHION_MNIST_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/dataset.h"

namespace pstrain {
namespace data {
namespace testing {

// Where Debian installs the files.
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist/";

// Reads `prefix`-{images-idx3,labels-idx1}-ubyte.gz ("train", "t10k") of
// kFashionMnistDir; NOT_FOUND naming both files where either cannot be read
// (the dataset is not installed).
absl::StatusOr<Dataset> ReadFashionMnist(const std::string& prefix);

// Examples [begin, begin + n) of `dataset` as float rows (GatherFeatures)
// and their labels. REQUIRES: begin + n <= dataset.size().
void GatherExamples(const Dataset& dataset, int64_t begin, int64_t n,
                    std::vector<float>* features,
                    std::vector<int32_t>* labels);

}  // namespace testing
}  // namespace data
}  // namespace pstrain

#endif  // PSTRAIN_DATA_FASHION_MNIST_TEST_UTIL_H_

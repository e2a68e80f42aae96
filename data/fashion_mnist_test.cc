// Reads the real Fashion-MNIST files where they are installed; skips, saying
// why, where they are not.
#include <string>
#include <vector>

#include "data/fashion_mnist_test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace data {
namespace {

// Reads `prefix`-{images-idx3,labels-idx1}-ubyte.gz and checks N images of
// 28 x 28 with `per_class` of each of the 10 classes.
void ExpectBalancedSet(const std::string& prefix, int64_t per_class) {
  absl::StatusOr<Dataset> d = testing::ReadFashionMnist(prefix);
  if (absl::IsNotFound(d.status())) GTEST_SKIP() << d.status();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->features.shape(),
            (std::vector<int64_t>{10 * per_class, 28, 28}));
  std::vector<int64_t> histogram(10);
  for (int32_t label : d->labels) ++histogram[label];
  EXPECT_EQ(histogram, std::vector<int64_t>(10, per_class));
  // Images are not blank: some pixels are dark, some bright.
  int64_t bright = 0;
  for (uint8_t v : d->features.flat<uint8_t>()) bright += v > 128;
  EXPECT_GT(bright, d->features.num_elements() / 20);
  EXPECT_LT(bright, d->features.num_elements() / 2);
}

TEST(FashionMnist, TestSetHas1000ImagesOfEachClass) {
  ExpectBalancedSet("t10k", 1000);
}

TEST(FashionMnist, TrainingSetHas6000ImagesOfEachClass) {
  ExpectBalancedSet("train", 6000);
}

}  // namespace
}  // namespace data
}  // namespace pstrain

#include "compute/cpu/sgd_throughput.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

constexpr char kDir[] = "/usr/share/datasets/fashion-mnist/";

// The 10,000 test images keep the test quick.
SgdThroughputOptions FashionMnistTestSet() {
  SgdThroughputOptions options;
  options.images_path = std::string(kDir) + "t10k-images-idx3-ubyte.gz";
  options.labels_path = std::string(kDir) + "t10k-labels-idx1-ubyte.gz";
  return options;
}

bool Installed(const SgdThroughputOptions& options) {
  return access(options.images_path.c_str(), R_OK) == 0 &&
         access(options.labels_path.c_str(), R_OK) == 0;
}

TEST(RunSgdThroughput, RefusesOptionsOutOfRange) {
  SgdThroughputOptions options = FashionMnistTestSet();
  options.threads = 0;
  EXPECT_EQ(RunSgdThroughput(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = FashionMnistTestSet();
  options.steps = 0;
  EXPECT_EQ(RunSgdThroughput(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RunSgdThroughput, MissingDatasetIsNotFound) {
  SgdThroughputOptions options;
  options.images_path = "/nonexistent/images.gz";
  options.labels_path = "/nonexistent/labels.gz";
  EXPECT_EQ(RunSgdThroughput(options).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RunSgdThroughput, TimesStepsThatLowerTheLoss) {
  SgdThroughputOptions options = FashionMnistTestSet();
  if (!Installed(options)) {
    GTEST_SKIP() << "Fashion-MNIST is not installed: no readable "
                 << options.images_path;
  }
  options.model = "mlp";
  options.batch = 32;
  options.learning_rate = 0.1f;
  options.warmup_steps = 0;
  options.steps = 1;
  absl::StatusOr<SgdThroughputResult> first = RunSgdThroughput(options);
  ASSERT_TRUE(first.ok()) << first.status();
  options.steps = 80;
  absl::StatusOr<SgdThroughputResult> trained = RunSgdThroughput(options);
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_GT(trained->seconds, 0);
  EXPECT_NEAR(trained->images_per_sec, 80 * 32 / trained->seconds,
              1e-6 * trained->images_per_sec);
  // A fresh 10-class model starts near log(10) = 2.3.
  EXPECT_GT(first->final_loss, 1.8);
  EXPECT_LT(trained->final_loss, 0.7 * first->final_loss);
}

TEST(RunSgdThroughput, UnknownModelIsNotFound) {
  SgdThroughputOptions options = FashionMnistTestSet();
  if (!Installed(options)) GTEST_SKIP() << "Fashion-MNIST is not installed";
  options.model = "/nonexistent/model.json";
  EXPECT_EQ(RunSgdThroughput(options).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RunSgdThroughput, RefusesAModelThatDoesNotTakeTheImages) {
  SgdThroughputOptions options = FashionMnistTestSet();
  if (!Installed(options)) GTEST_SKIP() << "Fashion-MNIST is not installed";
  // A model of 5 x 5 inputs; the images have 28 x 28 pixels.
  const char* tmp = std::getenv("TEST_TMPDIR");
  options.model = std::string(tmp != nullptr ? tmp : "/tmp") + "/small.json";
  std::ofstream(options.model) << R"({"class_name": "Sequential",
      "config": {"name": "small", "layers": [
        {"class_name": "InputLayer",
         "config": {"name": "in", "batch_input_shape": [null, 5, 5]}},
        {"class_name": "Flatten", "config": {"name": "flatten"}},
        {"class_name": "Dense", "config": {"name": "dense", "units": 10}}]}})";
  absl::Status status = RunSgdThroughput(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("[5, 5]"), std::string::npos) << status;
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

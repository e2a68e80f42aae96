// Runs everywhere CUDA is installed. Without a GPU it checks that
// CreateDevice fails cleanly with the runtime's reason; with GPUs it checks
// index validation and that a created device can copy memory both ways.
#include "compute/gpu/device.h"

#include <vector>

#include "common/cuda_probe.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

bool Contains(absl::string_view text, absl::string_view part) {
  return text.find(part) != absl::string_view::npos;
}

TEST(CreateDevice, FailsWithTheReasonWhenThereIsNoGpu) {
  absl::StatusOr<int> count = CudaDeviceCount();
  if (count.ok()) {
    GTEST_SKIP() << "skipped: this machine has " << *count
                 << " GPU(s); the no-GPU path cannot be exercised";
  }
  absl::StatusOr<std::unique_ptr<Device>> device = CreateDevice(0);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition)
      << device.status();
  // The same reason the probe gives, e.g. "no CUDA device: CUDA driver
  // version is insufficient for CUDA runtime version".
  EXPECT_TRUE(Contains(device.status().message(), count.status().message()))
      << device.status();
  EXPECT_TRUE(Contains(device.status().message(), "no CUDA device"))
      << device.status();
}

TEST(CreateDevice, RejectsANegativeIndexWithoutTouchingTheGpu) {
  absl::StatusOr<std::unique_ptr<Device>> device = CreateDevice(-1);
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument)
      << device.status();
}

TEST(CreateDevice, RejectsAnIndexBeyondTheLastGpu) {
  absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) {
    GTEST_SKIP() << "skipped: no usable GPU (" << count.status().message()
                 << ")";
  }
  absl::StatusOr<std::unique_ptr<Device>> device = CreateDevice(*count);
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument)
      << device.status();
}

TEST(Device, CopiesToTheGpuAndBack) {
  absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) {
    GTEST_SKIP() << "skipped: no usable GPU (" << count.status().message()
                 << ")";
  }
  for (int index = 0; index < *count; ++index) {
    absl::StatusOr<std::unique_ptr<Device>> device = CreateDevice(index);
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ((*device)->index(), index);
    EXPECT_NE((*device)->stream(), nullptr);
    EXPECT_NE((*device)->cublas(), nullptr);
    EXPECT_NE((*device)->cudnn(), nullptr);
    EXPECT_EQ((*device)->workspace_bytes(),
              static_cast<size_t>(DeviceOptions().workspace_bytes));
    const std::vector<float> host = {1.5f, -2.0f, 3.25f};
    absl::StatusOr<DeviceBuffer> buffer =
        (*device)->Allocate(host.size() * sizeof(float));
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    ASSERT_TRUE((*device)
                    ->CopyToDevice(host.data(), buffer->bytes(), buffer->data())
                    .ok());
    std::vector<float> back(host.size());
    ASSERT_TRUE((*device)
                    ->CopyToHost(buffer->data(), buffer->bytes(), back.data())
                    .ok());
    EXPECT_EQ(back, host);
  }
}

}  // namespace
}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

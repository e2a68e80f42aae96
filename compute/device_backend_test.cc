#include "compute/device_backend.h"

#include <string>

#include "common/gpu_devices.h"
#include "gtest/gtest.h"
#include "model/keras_model.h"

namespace pstrain {
namespace worker {
namespace {

ModelSpec Mlp() {
  absl::StatusOr<ModelSpec> spec = LoadModel("mlp", 1);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ModelSpec();
}

absl::StatusOr<DeviceBackend> Make(const std::string& device) {
  DeviceBackendOptions options;
  options.device = device;
  options.cpu_threads = 1;
  return CreateDeviceBackend(Mlp(), options);
}

TEST(DeviceBackend, NamesAreCheckedBeforeAnythingStarts) {
  for (const char* good : {"auto", "cpu", "gpu", "gpu:0", "gpu:12"}) {
    EXPECT_TRUE(CheckDeviceName(good).ok()) << good;
  }
  for (const char* bad : {"", "GPU", "tpu", "gpu:", "gpu:-1", "gpu:x", "cpu:0"}) {
    const absl::Status status = CheckDeviceName(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find(std::string("\"") + bad + "\""),
              std::string::npos)
        << status;
  }
  EXPECT_EQ(Make("tpu").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceBackend, CpuIsTheCpu) {
  absl::StatusOr<DeviceBackend> made = Make("cpu");
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_NE(made->backend, nullptr);
  EXPECT_EQ(made->description, "CPU (oneDNN, 1 thread)");
}

TEST(DeviceBackend, GpuNamesFollowTheGpusPresent) {
  const absl::StatusOr<int> gpus = GpuDeviceCount();
  absl::StatusOr<DeviceBackend> automatic = Make("auto");
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  absl::StatusOr<DeviceBackend> gpu = Make("gpu");
  absl::StatusOr<DeviceBackend> beyond = Make("gpu:64");
  EXPECT_EQ(beyond.status().code(), gpus.ok()
                                        ? absl::StatusCode::kInvalidArgument
                                        : absl::StatusCode::kFailedPrecondition)
      << beyond.status();
  if (!gpus.ok()) {
    std::cout << "no GPU here (" << gpus.status().message()
              << "): checking the CPU fallback and the errors\n";
    EXPECT_NE(automatic->description.find("CPU"), std::string::npos);
    EXPECT_NE(automatic->description.find("no GPU"), std::string::npos)
        << automatic->description;
    EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(gpu.status().message().find("--device=gpu: no usable GPU"),
              std::string::npos)
        << gpu.status();
    return;
  }
  EXPECT_EQ(automatic->description.rfind("GPU", 0), 0u)
      << automatic->description;
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  absl::StatusOr<DeviceBackend> first = Make("gpu:0");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->description.rfind("GPU 0 ", 0), 0u) << first->description;
}

TEST(DeviceBackend, GpuRefusesBf16NamingThePrecision) {
  for (const char* device : {"gpu", "gpu:0"}) {
    DeviceBackendOptions options;
    options.device = device;
    options.precision = Precision::kBf16;
    absl::StatusOr<DeviceBackend> made = CreateDeviceBackend(Mlp(), options);
    ASSERT_FALSE(made.ok()) << device;
    EXPECT_EQ(made.status().code(), absl::StatusCode::kUnimplemented)
        << made.status();
    EXPECT_NE(made.status().message().find(
                  "--precision=bf16: the GPU backend computes in fp32 only"),
              std::string::npos)
        << made.status();
    EXPECT_NE(made.status().message().find(std::string("--device=") + device),
              std::string::npos)
        << made.status();
  }
}

TEST(DeviceBackend, CpuTakesBf16WhereTheCpuHasIt) {
  DeviceBackendOptions options;
  options.device = "cpu";
  options.cpu_threads = 1;
  options.precision = Precision::kBf16;
  absl::StatusOr<DeviceBackend> made = CreateDeviceBackend(Mlp(), options);
  if (!made.ok()) {
    // A CPU without AVX-512 BF16: the refusal names the missing feature.
    EXPECT_EQ(made.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(made.status().message().find("avx512_bf16"), std::string::npos)
        << made.status();
    return;
  }
  EXPECT_EQ(made->description, "CPU (oneDNN, 1 thread, bf16)");
}

}  // namespace
}  // namespace worker
}  // namespace pstrain

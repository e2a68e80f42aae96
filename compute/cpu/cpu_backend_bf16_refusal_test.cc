// The CPU backend refuses bf16 where oneDNN cannot use AVX-512 BF16: this
// binary caps oneDNN at AVX2 (dnnl::set_max_cpu_isa, before any primitive
// exists; a test binary of its own, since the cap is for the process), as a
// CPU without avx512_bf16 would be, and checks the refusal's words.
#include "compute/cpu/bf16_support.h"
#include "compute/cpu/cpu_backend.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

TEST(CpuBackendBf16Refusal, ACpuWithoutAvx512Bf16RefusesNamingIt) {
  // Fails only once oneDNN has dispatched a JIT kernel: nothing has here.
  ASSERT_NO_THROW(dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2));
  ASSERT_EQ(dnnl::get_effective_cpu_isa(), dnnl::cpu_isa::avx2)
      << "this CPU has less than AVX2";
  absl::StatusOr<ModelSpec> spec = LoadModel("cnn", 42);
  ASSERT_TRUE(spec.ok()) << spec.status();
  CpuBackendOptions options;
  options.num_threads = 1;
  options.precision = Precision::kBf16;
  absl::StatusOr<std::unique_ptr<Backend>> bf16 =
      CreateCpuBackend(*spec, options);
  ASSERT_FALSE(bf16.ok());
  EXPECT_EQ(bf16.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(bf16.status().message(),
            "--precision=bf16 needs a CPU with AVX-512 BF16 (avx512_bf16) or "
            "AMX; this CPU lacks avx512_bf16 (oneDNN's ISA here: avx2); use "
            "--precision=fp32");
  EXPECT_FALSE(CheckCpuBf16Support().ok());
  // fp32 is still fine on it.
  options.precision = Precision::kFp32;
  EXPECT_TRUE(CreateCpuBackend(*spec, options).ok());
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

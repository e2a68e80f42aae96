#include "compute/cpu/bf16_support.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

TEST(Bf16SupportTest, AcceptsBf16AndAmx) {
  EXPECT_TRUE(CheckBf16Isa(dnnl::cpu_isa::avx512_core_bf16).ok());
  EXPECT_TRUE(CheckBf16Isa(dnnl::cpu_isa::avx512_core_amx).ok());
}

TEST(Bf16SupportTest, RefusesOlderIsasNamingTheMissingFeature) {
  for (dnnl::cpu_isa isa : {dnnl::cpu_isa::avx2, dnnl::cpu_isa::avx512_core,
                            dnnl::cpu_isa::avx512_core_vnni,
                            dnnl::cpu_isa::avx2_vnni, dnnl::cpu_isa::sse41}) {
    absl::Status status = CheckBf16Isa(isa);
    ASSERT_FALSE(status.ok()) << CpuIsaName(isa);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(status.message().find("lacks avx512_bf16"),
              absl::string_view::npos)
        << status;
    EXPECT_NE(status.message().find(CpuIsaName(isa)), absl::string_view::npos)
        << status;
    EXPECT_NE(status.message().find("--precision=bf16"),
              absl::string_view::npos)
        << status;
  }
}

// This machine's answer agrees with oneDNN's ISA, whichever it is.
TEST(Bf16SupportTest, HostCheckFollowsOneDnnIsa) {
  EXPECT_EQ(CheckCpuBf16Support().ok(),
            CheckBf16Isa(dnnl::get_effective_cpu_isa()).ok());
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

// Whether this CPU can compute bf16 mixed precision (compute/precision.h)
// through oneDNN: it needs AVX-512 BF16 (avx512_bf16, e.g. AMD Zen 4, Intel
// Cooper Lake) or AMX (Intel Sapphire Rapids and later), as oneDNN sees them
// (its effective ISA, which the DNNL_MAX_CPU_ISA environment variable may
// lower). Without them oneDNN would emulate bf16 slower than float32, so the
// chief and the worker refuse a bf16 run instead.
//
//   PSTRAIN_RETURN_IF_ERROR(CheckCpuBf16Support());
#ifndef PSTRAIN_COMPUTE_CPU_BF16_SUPPORT_H_
#define PSTRAIN_COMPUTE_CPU_BF16_SUPPORT_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "compute/precision.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain {
namespace worker {
namespace cpu {

// oneDNN's name of `isa`: "avx2", "avx512_core_bf16", ...
absl::string_view CpuIsaName(dnnl::cpu_isa isa);

// OK when `isa` includes AVX-512 BF16 (avx512_core_bf16 or
// avx512_core_amx); otherwise FAILED_PRECONDITION naming the missing
// feature and `isa`.
absl::Status CheckBf16Isa(dnnl::cpu_isa isa);

// CheckBf16Isa of oneDNN's effective ISA on this machine.
absl::Status CheckCpuBf16Support();

// OK for fp32; for bf16, CheckCpuBf16Support. For the chief's --precision
// (its line names the flag) and the CPU backend.
absl::Status CheckCpuPrecision(Precision precision);

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_CPU_BF16_SUPPORT_H_

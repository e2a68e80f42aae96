#include "compute/cpu/bf16_support.h"

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::string_view CpuIsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::all:
      return "all";
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
  }
  return "unknown";
}

absl::Status CheckBf16Isa(dnnl::cpu_isa isa) {
  // oneDNN's ISA values are bit sets, each including the ISAs below it.
  const unsigned bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  if ((static_cast<unsigned>(isa) & bf16) == bf16) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "--precision=bf16 needs a CPU with AVX-512 BF16 (avx512_bf16) or AMX; "
      "this CPU lacks avx512_bf16 (oneDNN's ISA here: ",
      CpuIsaName(isa), "); use --precision=fp32"));
}

absl::Status CheckCpuBf16Support() {
  return CheckBf16Isa(dnnl::get_effective_cpu_isa());
}

absl::Status CheckCpuPrecision(Precision precision) {
  if (precision == Precision::kFp32) return absl::OkStatus();
  return CheckCpuBf16Support();
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

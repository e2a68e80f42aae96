#include "compute/cpu/openmp_wait_policy.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::Status ReexecWithOpenMpWaitPolicy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr ||
      std::getenv("GOMP_SPINCOUNT") != nullptr) {
    return absl::OkStatus();
  }
  if (argv == nullptr || argv[0] == nullptr) {
    return absl::InvalidArgumentError(
        "ReexecWithOpenMpWaitPolicy: argv must hold the program name");
  }
  if (setenv("GOMP_SPINCOUNT", kOpenMpSpinCount, /*overwrite=*/1) != 0) {
    return absl::InternalError(absl::StrCat(
        "setting GOMP_SPINCOUNT for OpenMP: ", std::strerror(errno)));
  }
  execv("/proc/self/exe", argv);
  const int error = errno;  // execv returns only on failure.
  unsetenv("GOMP_SPINCOUNT");
  return absl::InternalError(absl::StrCat(
      "re-executing /proc/self/exe with GOMP_SPINCOUNT=", kOpenMpSpinCount,
      ": ", std::strerror(error)));
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

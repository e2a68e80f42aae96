// The arithmetic a run's heavy layers compute in (the chief's --precision,
// carried to the workers in TrainingConfig.precision): float32 throughout,
// or bf16 mixed precision (on the CPU backend: Conv2D and Dense multiply
// bf16 activations and weights and accumulate in float32; master weights,
// gradients, the loss and every other layer stay float32).
//
//   PSTRAIN_ASSIGN_OR_RETURN(Precision p, ParsePrecision(flag_value));
//   config.set_precision(std::string(PrecisionName(p)));
//   ...
//   PSTRAIN_ASSIGN_OR_RETURN(Precision p, ParsePrecision(config.precision()));
#ifndef PSTRAIN_COMPUTE_PRECISION_H_
#define PSTRAIN_COMPUTE_PRECISION_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace worker {

enum class Precision {
  kFp32,
  kBf16,
};

// "fp32" or "bf16".
absl::string_view PrecisionName(Precision precision);

// "fp32" (also "", what a TrainingConfig written before the field holds) or
// "bf16"; anything else is INVALID_ARGUMENT naming the value.
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_PRECISION_H_

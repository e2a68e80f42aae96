// A Backend for tests of the loops around the compute: every gradient 1, a
// fixed loss of 0.5 per example, every example correct in evaluation. The
// step loop, the chief's decisions and the ps's arithmetic are what such a
// test checks, not the numerics.
#ifndef PSTRAIN_TESTS_CONSTANT_BACKEND_H_
#define PSTRAIN_TESTS_CONSTANT_BACKEND_H_

#include "compute/backend.h"

namespace pstrain {
namespace testing {

class ConstantBackend : public worker::Backend {
 public:
  absl::StatusOr<worker::StepResult> TrainStep(
      const worker::StepInput& input, const worker::Weights&,
      worker::Gradients* gradients) override {
    for (auto& [name, g] : *gradients) {
      for (float& v : g->flat<float>()) v = 1;
    }
    return Result(input);
  }
  absl::StatusOr<worker::StepResult> Evaluate(const worker::StepInput& input,
                                              const worker::Weights&) override {
    return Result(input);
  }

 private:
  static worker::StepResult Result(const worker::StepInput& input) {
    worker::StepResult result;
    result.loss_sum = 0.5 * input.batch;
    result.examples = input.batch;
    result.correct = input.batch;
    return result;
  }
};

}  // namespace testing
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_CONSTANT_BACKEND_H_

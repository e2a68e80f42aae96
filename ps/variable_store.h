// Where a worker's dense variables live, as its step loop sees them: pull
// the values of a step, push the step's gradient sums. Two homes implement
// it: the ps tasks (ps::PsClusterClient, parameter-server runs) and the
// worker's own replica of the whole model, kept in step with the other
// workers' by an all-reduce (collective/local_replica.h, collective runs). A
// fake can stand in for either in a test of the step loop. A tensor-parallel
// member holds only its parts of split variables (HoldParts).
//
//   PSTRAIN_ASSIGN_OR_RETURN(int64_t version, store->PullDense(step, values));
//   ... compute `gradients` of `examples` examples ...
//   store->set_step(step, {global batch indices});
//   PSTRAIN_RETURN_IF_ERROR(store->PushDense(step, examples, gradients));
#ifndef PSTRAIN_PS_VARIABLE_STORE_H_
#define PSTRAIN_PS_VARIABLE_STORE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "ps/dense_part.h"

namespace pstrain {
namespace ps {

class VariableStore {
 public:
  virtual ~VariableStore() = default;

  // Pushes full-size gradient sums of `batch_size` examples (by variable
  // name; each float32 of the variable's shape) for `version` (the step in
  // sync mode, the version pulled in async mode).
  virtual absl::Status PushDense(
      int64_t version, int64_t batch_size,
      const std::map<std::string, Tensor*>& gradients) = 0;

  // Reads every variable in `values` (float32 of the variable's shape) as
  // of min_version or later. Returns the lowest version read.
  virtual absl::StatusOr<int64_t> PullDense(
      int64_t min_version, const std::map<std::string, Tensor*>& values) = 0;

  // From now on the variables of `parts` are pulled and pushed as those
  // parts only (ps/dense_part.h: a tensor-parallel member's share of a
  // split variable), in tensors of the part's shape. INVALID_ARGUMENT
  // naming the variable for an unknown one or a malformed part;
  // UNIMPLEMENTED for a store that holds whole variables only.
  virtual absl::Status HoldParts(
      const std::map<std::string, DensePart>& parts) {
    if (parts.empty()) return absl::OkStatus();
    return absl::UnimplementedError(
        "this variable store pulls and pushes whole variables only");
  }

  // The run's recovery generation, carried by every later call.
  virtual void set_generation(int64_t generation) = 0;
  // The step the next pushes belong to and the global batches they sum
  // (PsClient::set_step); `owed` marks a batch owed from an earlier step.
  virtual void set_step(int64_t step, const std::vector<int64_t>& batches,
                        bool owed = false) = 0;
};

}  // namespace ps
}  // namespace pstrain

#endif  // PSTRAIN_PS_VARIABLE_STORE_H_

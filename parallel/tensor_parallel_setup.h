// Everything a tensor-parallel run needs decided before it starts, from the
// model and the --mesh and --layout_map settings: the mesh, each variable's
// split, and the plan of every member of a group, each checked, so that a
// layout the workers cannot execute is refused before the run (by the chief,
// once it carries these settings), naming the flag, key, variable or layer
// and the reason.
//
//   PSTRAIN_ASSIGN_OR_RETURN(TensorParallelSetup setup,
//       SetUpTensorParallel(spec, "data:2,model:2", layout_json, 4));
//   setup.plans[at.model] ...              // what member at.model runs
//   setup.member_parameters[at.model] ...  // and the floats it holds
//   trainer_options.parts = MemberParts(spec, setup.plans[at.model]);
//
// Without a layout map every variable is replicated; with model:1 the run is
// today's data-parallel run.
#ifndef PSTRAIN_PARALLEL_TENSOR_PARALLEL_SETUP_H_
#define PSTRAIN_PARALLEL_TENSOR_PARALLEL_SETUP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/model_spec.h"
#include "parallel/layout_map.h"
#include "parallel/mesh.h"
#include "parallel/tensor_parallel_plan.h"
#include "ps/dense_part.h"

namespace pstrain {
namespace parallel {

struct TensorParallelSetup {
  Mesh mesh;
  VariableSplits splits;
  // By member (model index), mesh.model of them.
  std::vector<TensorParallelPlan> plans;
  // Floats of the model's variables, and those each member holds.
  int64_t model_parameters = 0;
  std::vector<int64_t> member_parameters;
};

// `mesh` as --mesh writes it ("" for data:N,model:1), `layout_map_json` the
// --layout_map file's text ("" for none), `num_workers` the run's.
// INVALID_ARGUMENT from ParseMesh, LayoutMap::Parse and Resolve,
// PlanTensorParallel, and, with model > 1, TensorParallelMember::CheckModel.
absl::StatusOr<TensorParallelSetup> SetUpTensorParallel(
    const worker::ModelSpec& spec, absl::string_view mesh,
    absl::string_view layout_map_json, int num_workers);

// The parts of the split dense variables that the member of `plan` holds,
// pulls and pushes (ps::VariableStore::HoldParts), by name; none when nothing
// is split. An embedding table split by vocabulary is not among them: the
// worker pulls and pushes its touched rows by id (worker/sparse_tables.h)
// into a whole-sized mirror, which TensorParallelBackend cuts.
std::map<std::string, ps::DensePart> MemberParts(
    const worker::ModelSpec& spec, const TensorParallelPlan& plan);

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_TENSOR_PARALLEL_SETUP_H_

#include "parallel/tensor_parallel_setup.h"

#include <utility>

#include "common/status_macros.h"
#include "parallel/tensor_parallel_member.h"

namespace pstrain {
namespace parallel {

absl::StatusOr<TensorParallelSetup> SetUpTensorParallel(
    const worker::ModelSpec& spec, absl::string_view mesh,
    absl::string_view layout_map_json, int num_workers) {
  TensorParallelSetup setup;
  PSTRAIN_ASSIGN_OR_RETURN(setup.mesh, ParseMesh(mesh, num_workers));
  PSTRAIN_ASSIGN_OR_RETURN(
      LayoutMap map,
      LayoutMap::Parse(layout_map_json.empty() ? "{}" : layout_map_json));
  PSTRAIN_ASSIGN_OR_RETURN(setup.splits,
                           map.Resolve(spec.variables, setup.mesh.model));
  if (setup.mesh.model > 1) {
    PSTRAIN_RETURN_IF_ERROR(TensorParallelMember::CheckModel(spec));
  }
  for (int m = 0; m < setup.mesh.model; ++m) {
    PSTRAIN_ASSIGN_OR_RETURN(
        TensorParallelPlan plan,
        PlanTensorParallel(spec, setup.splits, setup.mesh.model, m));
    int64_t held = 0;
    for (const auto& [name, var] : plan.variables) held += var.local_elements();
    setup.member_parameters.push_back(held);
    setup.plans.push_back(std::move(plan));
  }
  for (const auto& [name, split] : setup.splits) {
    int64_t n = 1;
    for (int64_t d : split.shape) n *= d;
    setup.model_parameters += n;
  }
  return setup;
}

std::map<std::string, ps::DensePart> MemberParts(
    const worker::ModelSpec& spec, const TensorParallelPlan& plan) {
  std::map<std::string, ps::DensePart> parts;
  for (const VariableDef& def : spec.variables) {
    const MemberVariable& var = plan.variables.at(def.name());
    if (var.split() && !def.sparse()) {
      parts[def.name()] = ps::DensePart{var.split_dim, var.begin, var.end};
    }
  }
  return parts;
}

}  // namespace parallel
}  // namespace pstrain

// The device mesh of a tensor-parallel run, after Keras's DeviceMesh: the
// workers arranged on two axes, `data` (D data-parallel replicas of the
// model) and `model` (M members that split one replica's variables).
//
//   PSTRAIN_ASSIGN_OR_RETURN(Mesh mesh, ParseMesh("data:2,model:2", 4));
//   MeshCoordinates at = mesh.CoordinatesOf(task_index);
//   // at.data: the model-parallel group (which batch it reads);
//   // at.model: the member within the group (which slices it holds).
//
// The M members of a group are consecutive task indexes (worker
// data * M + model) and read the same batch, as Paddle's tensor parallelism
// requires; the D groups are data-parallel replicas. With no --mesh the
// mesh is data:N,model:1, the plain data-parallel run. Immutable value.
#ifndef PSTRAIN_PARALLEL_MESH_H_
#define PSTRAIN_PARALLEL_MESH_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {
namespace parallel {

// The names of the mesh's axes, as layouts name them.
inline constexpr absl::string_view kDataAxis = "data";
inline constexpr absl::string_view kModelAxis = "model";

struct MeshCoordinates {
  int data = 0;   // the group, in [0, D)
  int model = 0;  // the member within the group, in [0, M)
};

struct Mesh {
  int data = 1;   // D: data-parallel groups
  int model = 1;  // M: members of a model-parallel group

  int num_workers() const { return data * model; }
  // REQUIRES: 0 <= task_index < num_workers().
  MeshCoordinates CoordinatesOf(int task_index) const {
    return {task_index / model, task_index % model};
  }
  // The task indexes of group `data_index`'s members, by member index.
  std::vector<int> GroupMembers(int data_index) const;
  // The task indexes holding member `model_index`'s slices in each group,
  // by group (the replicas its gradients are averaged with).
  std::vector<int> ReplicasOfMember(int model_index) const;
};

// `spec` as the --mesh flag writes it: "data:D,model:M" (either order, each
// axis once; an axis left out takes what the workers leave it: data =
// N / M, model = N / D), or empty for data:N,model:1. INVALID_ARGUMENT,
// naming the flag's text and what is wrong, for an unknown axis, a
// repeated one, a size that is not a positive integer, or D x M different
// from `num_workers` (or N not divisible by the one size given).
absl::StatusOr<Mesh> ParseMesh(absl::string_view spec, int num_workers);

}  // namespace parallel
}  // namespace pstrain

#endif  // PSTRAIN_PARALLEL_MESH_H_

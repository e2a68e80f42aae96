#include "parallel/mesh.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pstrain {
namespace parallel {
namespace {

absl::Status MeshError(absl::string_view spec, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("--mesh=", spec, ": ", problem));
}

}  // namespace

std::vector<int> Mesh::GroupMembers(int data_index) const {
  std::vector<int> tasks;
  for (int m = 0; m < model; ++m) tasks.push_back(data_index * model + m);
  return tasks;
}

std::vector<int> Mesh::ReplicasOfMember(int model_index) const {
  std::vector<int> tasks;
  for (int d = 0; d < data; ++d) tasks.push_back(d * model + model_index);
  return tasks;
}

absl::StatusOr<Mesh> ParseMesh(absl::string_view spec, int num_workers) {
  if (num_workers <= 0) {
    return MeshError(spec, absl::StrCat("the run has ", num_workers,
                                        " workers; a mesh needs at least 1"));
  }
  Mesh mesh;
  if (spec.empty()) {
    mesh.data = num_workers;
    return mesh;
  }
  int data = 0;
  int model = 0;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    std::pair<absl::string_view, absl::string_view> axis_size =
        absl::StrSplit(part, absl::MaxSplits(':', 1));
    absl::string_view axis = absl::StripAsciiWhitespace(axis_size.first);
    absl::string_view size_text = absl::StripAsciiWhitespace(axis_size.second);
    int* size = nullptr;
    if (axis == kDataAxis) {
      size = &data;
    } else if (axis == kModelAxis) {
      size = &model;
    } else {
      return MeshError(spec, absl::StrCat("unknown axis '", axis,
                                          "' (the axes are 'data' and "
                                          "'model', written as axis:size)"));
    }
    if (*size != 0) {
      return MeshError(spec, absl::StrCat("axis '", axis, "' given twice"));
    }
    if (!absl::SimpleAtoi(size_text, size) || *size <= 0) {
      return MeshError(spec,
                       absl::StrCat("axis '", axis, "' has size '", size_text,
                                    "'; expected a positive integer"));
    }
  }
  if (data == 0) {
    if (num_workers % model != 0) {
      return MeshError(spec, absl::StrCat("model:", model, " does not divide ",
                                          "the ", num_workers, " workers"));
    }
    data = num_workers / model;
  }
  if (model == 0) {
    if (num_workers % data != 0) {
      return MeshError(spec, absl::StrCat("data:", data, " does not divide ",
                                          "the ", num_workers, " workers"));
    }
    model = num_workers / data;
  }
  if (static_cast<int64_t>(data) * model != num_workers) {
    return MeshError(spec,
                     absl::StrCat("data x model = ", data, " x ", model, " = ",
                                  int64_t{data} * model, ", but the run has ",
                                  num_workers, " workers"));
  }
  mesh.data = data;
  mesh.model = model;
  return mesh;
}

}  // namespace parallel
}  // namespace pstrain

#include "parallel/mesh.h"

#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace parallel {
namespace {

TEST(Mesh, EmptySpecIsDataParallelOverAllWorkers) {
  absl::StatusOr<Mesh> mesh = ParseMesh("", 3);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->data, 3);
  EXPECT_EQ(mesh->model, 1);
  EXPECT_EQ(mesh->CoordinatesOf(2).data, 2);
  EXPECT_EQ(mesh->CoordinatesOf(2).model, 0);
}

TEST(Mesh, GroupsAreConsecutiveTaskIndexes) {
  absl::StatusOr<Mesh> mesh = ParseMesh("data:2,model:3", 6);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->data, 2);
  EXPECT_EQ(mesh->model, 3);
  // Workers 0-2 are group 0, 3-5 group 1; member = task % 3.
  const int want_data[] = {0, 0, 0, 1, 1, 1};
  const int want_model[] = {0, 1, 2, 0, 1, 2};
  for (int task = 0; task < 6; ++task) {
    EXPECT_EQ(mesh->CoordinatesOf(task).data, want_data[task]) << task;
    EXPECT_EQ(mesh->CoordinatesOf(task).model, want_model[task]) << task;
  }
  EXPECT_EQ(mesh->GroupMembers(1), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(mesh->ReplicasOfMember(2), (std::vector<int>{2, 5}));
}

TEST(Mesh, AxesInEitherOrderAndOneAxisInferred) {
  absl::StatusOr<Mesh> swapped = ParseMesh("model:2,data:2", 4);
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ(swapped->data, 2);
  EXPECT_EQ(swapped->model, 2);
  absl::StatusOr<Mesh> model_only = ParseMesh("model:2", 6);
  ASSERT_TRUE(model_only.ok()) << model_only.status();
  EXPECT_EQ(model_only->data, 3);
  EXPECT_EQ(model_only->model, 2);
}

void ExpectRefused(const char* spec, int workers, const char* words) {
  absl::StatusOr<Mesh> mesh = ParseMesh(spec, workers);
  ASSERT_FALSE(mesh.ok()) << spec;
  EXPECT_EQ(mesh.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  EXPECT_NE(mesh.status().message().find(words), absl::string_view::npos)
      << mesh.status();
  EXPECT_NE(mesh.status().message().find(spec), absl::string_view::npos)
      << mesh.status();
}

TEST(Mesh, RefusesBadSpecsNamingTheProblem) {
  ExpectRefused("data:2,model:2", 3, "= 4, but the run has 3 workers");
  ExpectRefused("data:2,pipe:2", 4, "unknown axis 'pipe'");
  ExpectRefused("data:2,data:2", 4, "axis 'data' given twice");
  ExpectRefused("data:0,model:4", 4, "has size '0'");
  ExpectRefused("data:two,model:2", 4, "has size 'two'");
  ExpectRefused("model:3", 4, "model:3 does not divide the 4 workers");
  ExpectRefused("data", 4, "has size ''");
}

}  // namespace
}  // namespace parallel
}  // namespace pstrain

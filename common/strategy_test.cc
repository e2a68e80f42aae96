#include "common/strategy.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "common/tf_config.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

ClusterSpec Cluster(const char* json) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(json);
  EXPECT_TRUE(config.ok()) << config.status();
  return config->cluster;
}

constexpr char kWithPs[] =
    R"({"cluster": {"chief": ["h0:1"], "worker": ["h1:1"], "ps": ["h2:1"]},
        "task": {"type": "chief", "index": 0}})";
constexpr char kWithoutPs[] =
    R"({"cluster": {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"]},
        "task": {"type": "worker", "index": 1}})";

TEST(Strategy, AutoFollowsTheCluster) {
  EXPECT_EQ(*ResolveStrategy("auto", Cluster(kWithPs)),
            Strategy::kParameterServer);
  EXPECT_EQ(*ResolveStrategy("auto", Cluster(kWithoutPs)),
            Strategy::kMultiWorkerMirrored);
}

TEST(Strategy, ANamedStrategyMustFitTheCluster) {
  EXPECT_EQ(*ResolveStrategy("parameter_server", Cluster(kWithPs)),
            Strategy::kParameterServer);
  EXPECT_EQ(*ResolveStrategy("multi_worker_mirrored", Cluster(kWithoutPs)),
            Strategy::kMultiWorkerMirrored);
  absl::Status no_ps =
      ResolveStrategy("parameter_server", Cluster(kWithoutPs)).status();
  EXPECT_EQ(no_ps.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(no_ps.message(), "--strategy=parameter_server"))
      << no_ps;
  EXPECT_TRUE(absl::StrContains(no_ps.message(), "no \"ps\" job")) << no_ps;
  absl::Status has_ps =
      ResolveStrategy("multi_worker_mirrored", Cluster(kWithPs)).status();
  EXPECT_EQ(has_ps.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(has_ps.message(), "(1 task)")) << has_ps;
}

TEST(Strategy, AnUnknownValueIsRefusedNamingIt) {
  absl::Status status = ResolveStrategy("mirrored", Cluster(kWithPs)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(status.message(), "--strategy: \"mirrored\""))
      << status;
}

}  // namespace
}  // namespace pstrain

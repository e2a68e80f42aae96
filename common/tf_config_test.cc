#include "common/tf_config.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TfConfig MustParse(const std::string& json) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(json);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *std::move(config) : TfConfig();
}

// Expects `json` to be refused with exactly `message`.
void ExpectError(const std::string& json, const std::string& message) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(json);
  ASSERT_FALSE(config.ok()) << json;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config.status().message(), message) << json;
}

std::string Address(const ClusterSpec& cluster, JobType job, int index) {
  absl::StatusOr<HostPort> address = cluster.Address(MakeTask(job, index));
  return address.ok() ? address->ToString() : address.status().ToString();
}

// TensorFlow's parameter-server example (distributed Estimator docs).
TEST(TfConfig, ParsesTensorFlowPsExample) {
  const TfConfig config = MustParse(R"({
    "cluster": {
      "chief": ["host0:2222"],
      "worker": ["host1:2222", "host2:2222", "host3:2222"],
      "ps": ["host4:2222", "host5:2222"]
    },
    "task": {"type": "worker", "index": 1}
  })");
  EXPECT_EQ(config.task.job(), JOB_WORKER);
  EXPECT_EQ(config.task.index(), 1);
  EXPECT_EQ(config.cluster.NumTasks(JOB_CHIEF), 1);
  EXPECT_EQ(config.cluster.NumTasks(JOB_WORKER), 3);
  EXPECT_EQ(config.cluster.NumTasks(JOB_PS), 2);
  EXPECT_EQ(config.cluster.NumTasks(JOB_EVALUATOR), 0);
  EXPECT_EQ(Address(config.cluster, JOB_WORKER, 2), "host3:2222");
  EXPECT_EQ(Address(config.cluster, JOB_PS, 0), "host4:2222");
  EXPECT_EQ(config.rpc_layer, "");
  EXPECT_EQ(config.environment, "");
}

// MultiWorkerMirroredStrategy's example: workers only, on one host.
TEST(TfConfig, ParsesWorkerOnlyExample) {
  const TfConfig config = MustParse(
      R"({"cluster": {"worker": ["localhost:20000", "localhost:20001"]},
          "task": {"type": "worker", "index": 0}})");
  EXPECT_EQ(config.cluster.TaskIndices(JOB_WORKER), (std::vector<int>{0, 1}));
  EXPECT_EQ(Address(config.cluster, JOB_WORKER, 1), "localhost:20001");
}

// What Kubeflow's TFJob operator writes into each pod.
TEST(TfConfig, ParsesTfJobStyleConfig) {
  const TfConfig config = MustParse(R"({
    "cluster": {
      "chief": ["mnist-chief-0.kubeflow.svc:2222"],
      "ps": ["mnist-ps-0.kubeflow.svc:2222", "mnist-ps-1.kubeflow.svc:2222"],
      "worker": ["mnist-worker-0.kubeflow.svc:2222",
                 "mnist-worker-1.kubeflow.svc:2222"]
    },
    "task": {"type": "ps", "index": 1},
    "environment": "cloud"
  })");
  EXPECT_EQ(config.task.job(), JOB_PS);
  EXPECT_EQ(config.task.index(), 1);
  EXPECT_EQ(config.environment, "cloud");
  EXPECT_EQ(Address(config.cluster, JOB_PS, 1), "mnist-ps-1.kubeflow.svc:2222");
}

TEST(TfConfig, ParsesSparseJobs) {
  const TfConfig config = MustParse(R"({
    "cluster": {"chief": {"0": "h0:1"}, "worker": {"1": "h1:1", "0": "h3:1"}},
    "task": {"type": "worker", "index": 1}
  })");
  EXPECT_EQ(config.cluster.TaskIndices(JOB_WORKER), (std::vector<int>{0, 1}));
  EXPECT_EQ(Address(config.cluster, JOB_WORKER, 1), "h1:1");
  EXPECT_EQ(config.cluster.Address(MakeTask(JOB_WORKER, 2)).status().message(),
            "task worker:2 is not in the cluster");
}

// Every task of a job is placed on, or sharded to, by index: a job with a
// gap would fail the run later; it is refused here, naming the gap.
TEST(TfConfig, RefusesSparseJobsWithGaps) {
  const absl::StatusOr<TfConfig> config = ParseTfConfig(R"({
    "cluster": {"chief": ["h0:1"], "worker": {"0": "h1:1", "3": "h3:1"}},
    "task": {"type": "worker", "index": 3}
  })");
  EXPECT_EQ(config.status().message(),
            "TF_CONFIG: cluster.worker: task 1 is missing (a job's tasks must "
            "be numbered 0 to 1 without gaps)");
}

TEST(TfConfig, AcceptsLegacyMasterAsChief) {
  const TfConfig config = MustParse(R"({
    "cluster": {"master": ["m:2222"], "worker": ["w:2222"]},
    "task": {"type": "master", "index": 0}
  })");
  EXPECT_EQ(config.task.job(), JOB_CHIEF);
  EXPECT_EQ(Address(config.cluster, JOB_CHIEF, 0), "m:2222");
}

TEST(TfConfig, EvaluatorIsNotPartOfTheTrainingCluster) {
  const TfConfig config = MustParse(R"({
    "cluster": {"chief": ["c:1"], "ps": ["p:1"], "worker": ["w0:1", "w1:1"],
                "evaluator": ["e:1"]},
    "task": {"type": "evaluator", "index": 0},
    "rpc_layer": "grpc"
  })");
  EXPECT_EQ(config.task.job(), JOB_EVALUATOR);
  EXPECT_EQ(config.rpc_layer, "grpc");
  std::vector<std::string> names;
  for (const TaskRef& task : config.cluster.TrainingTasks()) {
    names.push_back(TaskName(task));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"chief:0", "ps:0", "worker:0",
                                             "worker:1"}));
}

TEST(TfConfig, EvaluatorMayRunOutsideTheCluster) {
  const TfConfig config = MustParse(
      R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "evaluator", "index": 0}})");
  EXPECT_EQ(config.task.job(), JOB_EVALUATOR);
}

TEST(TfConfig, ParsesIpv4AndIpv6Addresses) {
  const TfConfig config = MustParse(R"({
    "cluster": {"chief": ["10.0.0.1:2222"], "ps": ["[fd00::2]:2222"]},
    "task": {"type": "chief", "index": 0}
  })");
  EXPECT_EQ(Address(config.cluster, JOB_PS, 0), "[fd00::2]:2222");
}

TEST(TfConfig, RefusesInvalidJsonWithPosition) {
  ExpectError(R"({"cluster": {"worker": ["a:1",]}})",
              "TF_CONFIG: invalid JSON: parse error at line 1, column 31: "
              "syntax error while parsing value - unexpected ']'; expected "
              "'[', '{', or a literal");
  ExpectError("", "TF_CONFIG: invalid JSON: parse error at line 1, column 1: "
                  "syntax error while parsing value - unexpected end of "
                  "input; expected '[', '{', or a literal");
  ExpectError(R"(["worker"])", "TF_CONFIG: expected a JSON object, got an array");
  ExpectError(std::string(300, '[') + std::string(300, ']'),
              "TF_CONFIG: invalid JSON: JSON nested more than 256 levels deep");
}

TEST(TfConfig, RefusesMissingClusterOrTask) {
  ExpectError(R"({"task": {"type": "worker", "index": 0}})",
              "TF_CONFIG: missing \"cluster\" (the jobs and their addresses)");
  ExpectError(R"({"cluster": {"worker": ["w:1"]}})",
              "TF_CONFIG: missing \"task\" (this process's {\"type\": ..., "
              "\"index\": ...})");
  ExpectError(R"({"cluster": ["w:1"], "task": {"type": "worker", "index": 0}})",
              "TF_CONFIG: cluster: expected an object of jobs, got an array");
  ExpectError(R"({"cluster": {"worker": ["w:1"]}, "task": "worker"})",
              "TF_CONFIG: task: expected an object {\"type\": ..., \"index\": "
              "...}, got a string");
}

TEST(TfConfig, RefusesUnknownJobsAndMasterBesideChief) {
  ExpectError(R"({"cluster": {"workers": ["w:1"]}, "task": {"type": "worker", "index": 0}})",
              "TF_CONFIG: cluster: unknown job \"workers\" (expected chief, "
              "worker, ps or evaluator)");
  ExpectError(R"({"cluster": {"chief": ["c:1"], "master": ["m:1"]},
                  "task": {"type": "chief", "index": 0}})",
              "TF_CONFIG: cluster: both \"chief\" and its legacy name "
              "\"master\" are given; keep one");
}

TEST(TfConfig, RefusesEmptyOrMalformedJobs) {
  ExpectError(R"({"cluster": {"chief": ["c:1"], "ps": []}, "task": {"type": "chief", "index": 0}})",
              "TF_CONFIG: cluster.ps: empty job (no tasks)");
  ExpectError(R"({"cluster": {"ps": {}}, "task": {"type": "ps", "index": 0}})",
              "TF_CONFIG: cluster.ps: empty job (no tasks)");
  ExpectError(R"({"cluster": {"ps": "p:1"}, "task": {"type": "ps", "index": 0}})",
              "TF_CONFIG: cluster.ps: expected a list of \"host:port\" or a "
              "{\"index\": \"host:port\"} map, got a string");
  ExpectError(R"({"cluster": {"ps": [2222]}, "task": {"type": "ps", "index": 0}})",
              "TF_CONFIG: cluster.ps[0]: expected a \"host:port\" string, got "
              "a number");
  ExpectError(R"({"cluster": {"ps": {"-1": "p:1"}}, "task": {"type": "ps", "index": 0}})",
              "TF_CONFIG: cluster.ps: task index \"-1\" is not a non-negative "
              "integer");
  ExpectError(R"({"cluster": {"ps": {"one": "p:1"}}, "task": {"type": "ps", "index": 0}})",
              "TF_CONFIG: cluster.ps: task index \"one\" is not a non-negative "
              "integer");
}

TEST(TfConfig, RefusesMoreThanOneChiefOrEvaluator) {
  ExpectError(R"({"cluster": {"chief": ["c:1", "c:2"]}, "task": {"type": "chief", "index": 0}})",
              "TF_CONFIG: cluster.chief: at most one task allowed, found 2");
  ExpectError(R"({"cluster": {"worker": ["w:1"], "evaluator": ["e:1", "e:2"]},
                  "task": {"type": "worker", "index": 0}})",
              "TF_CONFIG: cluster.evaluator: at most one task allowed, found 2");
}

TEST(TfConfig, RefusesMalformedAddressesNamingTheTask) {
  ExpectError(R"({"cluster": {"worker": ["w:1", "host1"]}, "task": {"type": "worker", "index": 0}})",
              "TF_CONFIG: cluster.worker[1]: malformed address \"host1\": "
              "missing port (expected host:port)");
  ExpectError(R"({"cluster": {"worker": ["w:70000"]}, "task": {"type": "worker", "index": 0}})",
              "TF_CONFIG: cluster.worker[0]: malformed address \"w:70000\": "
              "port 70000 out of range 1-65535");
  ExpectError(R"({"cluster": {"worker": {"4": "fe80::1:80"}}, "task": {"type": "worker", "index": 4}})",
              "TF_CONFIG: cluster.worker[4]: malformed address \"fe80::1:80\": "
              "an IPv6 host must be in brackets ([::1]:port)");
}

TEST(TfConfig, RefusesTheSameAddressTwice) {
  ExpectError(R"({"cluster": {"ps": ["h:1"], "worker": ["w:1", "h:1"]},
                  "task": {"type": "worker", "index": 0}})",
              "TF_CONFIG: cluster.worker[1]: address \"h:1\" is also "
              "cluster.ps[0]");
  ExpectError(R"({"cluster": {"worker": ["[::1]:5", "[0:0::1]:5"]},
                  "task": {"type": "worker", "index": 0}})",
              "TF_CONFIG: cluster.worker[1]: address \"[::1]:5\" is also "
              "cluster.worker[0]");
  ExpectError(R"({"cluster": {"chief": ["Host-A:1"], "worker": ["host-a:1"]},
                  "task": {"type": "worker", "index": 0}})",
              "TF_CONFIG: cluster.worker[0]: address \"host-a:1\" is also "
              "cluster.chief[0]");
}

TEST(TfConfig, RefusesBadTaskType) {
  ExpectError(R"({"cluster": {"worker": ["w:1"]}, "task": {"index": 0}})",
              "TF_CONFIG: task.type: missing");
  ExpectError(R"({"cluster": {"worker": ["w:1"]}, "task": {"type": 1, "index": 0}})",
              "TF_CONFIG: task.type: expected a string, got a number");
  ExpectError(R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "work", "index": 0}})",
              "TF_CONFIG: task.type: unknown job \"work\" (expected chief, "
              "worker, ps or evaluator)");
  ExpectError(R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"]},
                  "task": {"type": "ps", "index": 0}})",
              "TF_CONFIG: task.type: \"ps\" is not a job of the cluster "
              "(jobs: chief, worker)");
}

TEST(TfConfig, RefusesBadTaskIndex) {
  const std::string cluster = R"("cluster": {"worker": ["w0:1", "w1:1"]})";
  ExpectError("{" + cluster + R"(, "task": {"type": "worker"}})",
              "TF_CONFIG: task.index: missing");
  ExpectError("{" + cluster + R"(, "task": {"type": "worker", "index": "1"}})",
              "TF_CONFIG: task.index: expected an integer, got a string");
  ExpectError("{" + cluster + R"(, "task": {"type": "worker", "index": 1.5}})",
              "TF_CONFIG: task.index: expected an integer, got a number");
  ExpectError("{" + cluster + R"(, "task": {"type": "worker", "index": -1}})",
              "TF_CONFIG: task.index: -1 is negative");
  ExpectError("{" + cluster + R"(, "task": {"type": "worker", "index": 2}})",
              "TF_CONFIG: task.index: 2 is out of range: job \"worker\" has 2 "
              "tasks (indices 0-1)");
  ExpectError("{" + cluster +
                  R"(, "task": {"type": "worker", "index": 99999999999}})",
              "TF_CONFIG: task.index: 99999999999 is too large");
  ExpectError(R"({"cluster": {"worker": {"1": "a:1", "0": "b:1"}},
                  "task": {"type": "worker", "index": 2}})",
              "TF_CONFIG: task.index: 2 is out of range: job \"worker\" "
              "has 2 tasks (indices 0-1)");
  ExpectError(R"({"cluster": {"evaluator": ["e:1"]}, "task": {"type": "evaluator", "index": 1}})",
              "TF_CONFIG: task.index: 1 is out of range: job \"evaluator\" has "
              "1 task (indices 0-0)");
}

TEST(TfConfig, RefusesBadOptionalFields) {
  const std::string base =
      R"("cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": 0})";
  ExpectError("{" + base + R"(, "rpc_layer": "grpc+verbs"})",
              "TF_CONFIG: rpc_layer: \"grpc+verbs\" is not supported (pstrain "
              "speaks \"grpc\")");
  ExpectError("{" + base + R"(, "environment": 3})",
              "TF_CONFIG: environment: expected a string, got a number");
}

TEST(TfConfigText, FlagWinsOverEnvironment) {
  absl::StatusOr<std::string> text = TfConfigText("{\"a\": 1}", "{\"b\": 2}");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "{\"a\": 1}");
  text = TfConfigText("", "{\"b\": 2}");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "{\"b\": 2}");
}

TEST(TfConfigText, ReadsAtPathFromFile) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/tf_config.json";
  std::ofstream(path) << R"({"cluster": {"ps": ["p:1"]}, "task": {"type": "ps", "index": 0}})";
  absl::StatusOr<std::string> text = TfConfigText("@" + path, nullptr);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(ParseTfConfig(*text).ok());
}

TEST(TfConfigText, ErrorsNameTheProblem) {
  EXPECT_EQ(TfConfigText("", nullptr).status().message(),
            "TF_CONFIG: not set (set the TF_CONFIG environment variable or "
            "pass --tf_config)");
  EXPECT_EQ(TfConfigText("", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TfConfigText("@/nonexistent/tf.json", nullptr).status().message(),
            "TF_CONFIG: cannot read /nonexistent/tf.json: No such "
            "file or directory");
  // A wrong path is not read into memory without end.
  EXPECT_EQ(TfConfigText("@/dev/zero", nullptr).status().message(),
            "TF_CONFIG: /dev/zero is larger than 16777216 bytes");
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

TEST(ReadTfConfig, ChecksTheBinarysRole) {
  const char* json =
      R"({"cluster": {"ps": ["p:1"], "worker": ["w:1"]}, "task": {"type": "worker", "index": 0}})";
  absl::StatusOr<TfConfig> config = ReadTfConfig("", json, JOB_WORKER);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task.job(), JOB_WORKER);
  EXPECT_EQ(ReadTfConfig(json, nullptr, JOB_PS).status().message(),
            "TF_CONFIG: task.type: \"worker\", but this is the ps binary "
            "(expected \"ps\")");
  EXPECT_EQ(ReadTfConfig("", nullptr, JOB_PS).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTfConfig(json, nullptr, JOB_CHIEF, JOB_EVALUATOR)
                .status()
                .message(),
            "TF_CONFIG: task.type: \"worker\", but this is the chief binary "
            "(expected \"chief\" or \"evaluator\")");
  const char* evaluator =
      R"({"cluster": {"ps": ["p:1"], "worker": ["w:1"]}, "task": {"type": "evaluator", "index": 0}})";
  EXPECT_TRUE(ReadTfConfig(evaluator, nullptr, JOB_CHIEF, JOB_EVALUATOR).ok());
}

TEST(ListenAddress, IsTheTasksAddressWithThePortFlagInPlaceOfItsPort) {
  const TfConfig ps = MustParse(
      R"({"cluster": {"ps": ["p0:2222", "p1:2223"], "worker": ["w:1"]},
          "task": {"type": "ps", "index": 1}})");
  absl::StatusOr<HostPort> address = ListenAddress(ps, 0);
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->ToString(), "p1:2223");
  address = ListenAddress(ps, 9000);
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->ToString(), "p1:9000");
}

TEST(ListenAddress, AnUnlistedEvaluatorHasNone) {
  const TfConfig evaluator = MustParse(
      R"({"cluster": {"ps": ["p:1"], "worker": ["w:1"]},
          "task": {"type": "evaluator", "index": 0}})");
  absl::StatusOr<HostPort> address = ListenAddress(evaluator, 9000);
  ASSERT_FALSE(address.ok());
  EXPECT_EQ(address.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(address.status().message(),
            "task evaluator:0 is not in the cluster");
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

TEST(ClusterSpec, ToStringIsCanonicalOverTheTrainingTasks) {
  absl::StatusOr<TfConfig> a = ParseTfConfig(R"({"cluster": {
      "worker": ["w0:1", "w1:1"], "chief": ["c:1"], "ps": ["[0:0::1]:2"],
      "evaluator": ["e:1"]}, "task": {"type": "ps", "index": 0}})");
  absl::StatusOr<TfConfig> b = ParseTfConfig(R"({"cluster": {
      "chief": ["c:1"], "ps": {"0": "[::1]:2"}, "worker": ["w0:1", "w1:1"]},
      "task": {"type": "worker", "index": 1}})");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->cluster.ToString(),
            "chief:0=c:1 ps:0=[::1]:2 worker:0=w0:1 worker:1=w1:1");
  EXPECT_EQ(a->cluster.ToString(), b->cluster.ToString());
}

}  // namespace
}  // namespace pstrain

// Every process of a running cluster serves /metrics, and Debian's real
// Prometheus server scrapes them: the step counters rise, every task is up,
// the ps's push latency histogram has samples, and promtool finds nothing
// wrong in any process's output.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/http_get.h"
#include "tests/local_cluster.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace testing {
namespace {

constexpr char kPrometheus[] = "/usr/bin/prometheus";
constexpr char kPromtool[] = "/usr/bin/promtool";

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

// The result vector of PromQL `query` (instant), empty on any failure.
nlohmann::json Query(int prometheus_port, const std::string& query) {
  int code = 0;
  const std::string body = HttpGet(
      prometheus_port, "/api/v1/query?query=" + UrlEncode(query), &code);
  const nlohmann::json reply = nlohmann::json::parse(body, nullptr, false);
  if (code != 200 || !reply.is_object() || reply["status"] != "success") {
    return nlohmann::json::array();
  }
  return reply["data"]["result"];
}

// Value of one result of Query.
double ValueOf(const nlohmann::json& result) {
  return std::stod(result["value"][1].get<std::string>());
}

// Runs `command` through the shell; returns its exit code, output in *out.
int Shell(const std::string& command, std::string* out) {
  out->clear();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Prometheus, ScrapesEveryTaskOfARunningCluster) {
  // Not a skip: CI installs it (third_party/install_deps.sh).
  ASSERT_EQ(access(kPrometheus, X_OK), 0)
      << kPrometheus << " is missing: install Debian's prometheus package "
      << "(third_party/install_deps.sh does)";
  ASSERT_EQ(access(kPromtool, X_OK), 0) << kPromtool << " is missing";
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;

  const LocalCluster cluster(/*num_ps=*/1, /*num_workers=*/2);
  // Metrics port of each task, by Prometheus's `task` label.
  std::map<std::string, int> ports;
  std::vector<Subprocess> tasks;
  const std::string model_dir = TempPath("prom-model");
  auto metrics_flag = [&ports](const std::string& task) {
    ports[task] = PickFreePort();
    return absl::StrCat("--metrics_port=", ports[task]);
  };
  tasks.push_back(cluster.Start(
      "prom", "ps", 0, {metrics_flag("ps0"), "--model_dir=" + model_dir}));
  for (int i = 0; i < 2; ++i) {
    // Slow steps: the run goes on while Prometheus scrapes it.
    tasks.push_back(cluster.Start(
        "prom", "worker", i,
        {metrics_flag(absl::StrCat("worker", i)), "--push_delay_ms=30"}));
  }
  tasks.push_back(
      cluster.Start("prom", "chief", 0,
                    {metrics_flag("chief"), "--model=mlp", "--steps=100000",
                     "--batch_size=32", "--print_every_steps=20",
                     "--model_dir=" + model_dir}));

  const int prometheus_port = PickFreePort();
  std::string config =
      "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
      "scrape_configs:\n  - job_name: pstrain\n    static_configs:\n";
  for (const auto& [task, port] : ports) {
    absl::StrAppend(&config, "      - targets: ['127.0.0.1:", port,
                    "']\n        labels: {task: ", task, "}\n");
  }
  const std::string config_path = TempPath("prometheus.yml");
  ASSERT_TRUE(WriteFile(config_path, config));
  std::string out;
  ASSERT_EQ(Shell(absl::StrCat(kPromtool, " check config ", config_path), &out),
            0)
      << out;
  Subprocess prometheus = Subprocess::Start(
      kPrometheus,
      {"--config.file=" + config_path,
       "--storage.tsdb.path=" + TempPath("prometheus-data"),
       absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port)},
      {}, TempPath("prometheus.log"));

  // Until Prometheus has seen every target up and both workers' step
  // counters rise (a rate needs two scrapes of a moving counter).
  const std::string rising = "rate(pstrain_worker_steps_total[20s]) > 0";
  const absl::Time deadline = absl::Now() + absl::Seconds(90);
  while (absl::Now() < deadline &&
         (Query(prometheus_port, "up == 1").size() < ports.size() ||
          Query(prometheus_port, rising).size() < 2 ||
          Query(prometheus_port, "pstrain_chief_global_step > 0").empty())) {
    absl::SleepFor(absl::Milliseconds(500));
  }

  const nlohmann::json up = Query(prometheus_port, "up");
  ASSERT_EQ(up.size(), ports.size())
      << up.dump() << "\n"
      << ReadFile(prometheus.log_path()) << Log(tasks.back());
  for (const nlohmann::json& target : up) {
    EXPECT_EQ(ValueOf(target), 1) << target.dump();
    EXPECT_EQ(ports.count(target["metric"]["task"].get<std::string>()), 1u);
  }
  const nlohmann::json steps = Query(prometheus_port, rising);
  EXPECT_EQ(steps.size(), 2u) << steps.dump();
  EXPECT_FALSE(Query(prometheus_port, "pstrain_chief_global_step > 0").empty());
  // Pushes were timed on the ps, and their parts on the workers.
  const nlohmann::json pushes =
      Query(prometheus_port,
            "pstrain_ps_request_duration_seconds_count{method=\"PushDense\"}");
  ASSERT_EQ(pushes.size(), 1u) << pushes.dump();
  EXPECT_GT(ValueOf(pushes[0]), 0);
  const nlohmann::json push_p50 =
      Query(prometheus_port,
            "histogram_quantile(0.5, pstrain_ps_request_duration_seconds_bucket"
            "{method=\"PushDense\"})");
  ASSERT_EQ(push_p50.size(), 1u) << push_p50.dump();
  EXPECT_GT(ValueOf(push_p50[0]), 0);
  EXPECT_EQ(Query(prometheus_port,
                  "pstrain_worker_step_phase_seconds_count{phase=\"push\"} > 0")
                .size(),
            2u);
  // Both workers counted what their pulls and pushes moved, each way; with
  // no model-parallel group, nothing moved within one.
  EXPECT_EQ(
      Query(prometheus_port, "pstrain_worker_ps_bytes_total > 4000").size(),
      4u);
  EXPECT_EQ(
      Query(prometheus_port, "pstrain_worker_group_bytes_total == 0").size(),
      4u);
  EXPECT_EQ(Query(prometheus_port, "pstrain_ps_variables > 0").size(), 1u);
  EXPECT_EQ(Query(prometheus_port, "pstrain_chief_task_alive == 1").size(), 3u);
  EXPECT_EQ(Query(prometheus_port, "pstrain_build_info").size(), 4u);

  // promtool lints each process's exposition.
  for (const auto& [task, port] : ports) {
    int code = 0;
    const std::string text = HttpGet(port, "/metrics", &code);
    ASSERT_EQ(code, 200) << task;
    // promtool passes an empty input too.
    EXPECT_NE(text.find("\npstrain_build_info{"), std::string::npos) << text;
    const std::string path = TempPath("metrics-" + task + ".txt");
    EXPECT_TRUE(WriteFile(path, text));
    EXPECT_EQ(Shell(absl::StrCat(kPromtool, " check metrics < ", path), &out),
              0)
        << task << ": " << out;
    EXPECT_EQ(out, "") << task;
  }

  EXPECT_EQ(prometheus.Terminate(), 0) << ReadFile(prometheus.log_path());
  for (Subprocess& task : tasks) task.Stop(9);
}

TEST(Prometheus, BadMetricsPortExitsTwoNamingTheFlag) {
  const LocalCluster cluster(/*num_ps=*/1, /*num_workers=*/1);
  for (const std::string type : {"ps", "worker"}) {
    for (const std::string port : {"-1", "65536"}) {
      Subprocess task =
          cluster.Start("badport", type, 0, {"--metrics_port=" + port});
      EXPECT_EQ(task.Wait(30), 2) << type << " " << port;
      EXPECT_NE(
          Log(task).find("--metrics_port: " + port + " is not in [0, 65535]"),
          std::string::npos)
          << Log(task);
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace pstrain

// The chief's --precision=bf16 reaches the workers (TrainingConfig.precision)
// and a real run trains in it: a run of the seed cnn on Fashion-MNIST, ps
// and worker processes on 127.0.0.1, ends within a few points of the same
// run in fp32, its worker saying it computes in bf16 (skipped, saying why,
// on a CPU without AVX-512 BF16 or AMX). A worker whose CPU lacks AVX-512
// BF16 (oneDNN capped at AVX2 through DNNL_MAX_CPU_ISA, as on such a CPU)
// refuses the run, naming the missing feature; on such a CPU the chief
// refuses it first.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

// The final test accuracy of 300 sync steps of 32 images of the cnn (the
// chief's default optimizer, Adam) with --precision=`precision`, 1 ps and 1
// worker (1 thread); the worker's log in `worker_log`.
double Train(const std::string& precision, std::string* worker_log) {
  const std::string name = "bf16-run-" + precision;
  const std::string model_dir = TempPath(name + "-model");
  LocalCluster(1, 1).Run(
      name,
      {"--model=cnn", "--steps=300", "--batch_size=32",
       "--precision=" + precision, "--model_dir=" + model_dir, "--threads=1"},
      {"--threads=1"});
  *worker_log = ReadFile(TempPath(name + "-worker0.log"));
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  if (!summary.is_object() || !summary.contains("test_accuracy")) {
    ADD_FAILURE() << "no test_accuracy in " << model_dir << "/summary.json";
    return 0;
  }
  std::printf("%s: %s\n", precision.c_str(), summary.dump().c_str());
  return summary["test_accuracy"].get<double>();
}

TEST(Bf16Run, TheCnnTrainsInBf16AsWellAsInFp32) {
  if (!HaveFashionMnist()) {
    std::printf("SKIPPED: no %s\n", kFashionMnistDir);
    GTEST_SKIP() << "no " << kFashionMnistDir;
  }
  PSTRAIN_SKIP_WITHOUT_BF16();
  std::string fp32_log, bf16_log;
  const double fp32 = Train("fp32", &fp32_log);
  const double bf16 = Train("bf16", &bf16_log);
  EXPECT_TRUE(
      absl::StrContains(bf16_log, "computing on CPU (oneDNN, 1 thread, bf16"))
      << bf16_log;
  EXPECT_FALSE(absl::StrContains(fp32_log, "bf16")) << fp32_log;
  EXPECT_GT(bf16, 0.7);
  EXPECT_NEAR(bf16, fp32, 0.03);
}

TEST(Bf16Run, AWorkerWithoutAvx512Bf16RefusesTheRun) {
  if (!HaveFashionMnist()) {
    std::printf("SKIPPED: no %s\n", kFashionMnistDir);
    GTEST_SKIP() << "no " << kFashionMnistDir;
  }
  constexpr char kRefusal[] =
      "--precision=bf16 needs a CPU with AVX-512 BF16 (avx512_bf16) or AMX; "
      "this CPU lacks avx512_bf16 (oneDNN's ISA here: avx2)";
  LocalCluster cluster(1, 1);
  Subprocess ps = cluster.Start("bf16-refused", "ps", 0);
  // The chief checks its own CPU first: where that lacks bf16 it refuses the
  // run itself, and no worker gets one to refuse.
  const bool cpu_has_bf16 = worker::cpu::Bf16Unavailable().empty();
  if (!cpu_has_bf16) ASSERT_EQ(setenv("DNNL_MAX_CPU_ISA", "AVX2", 1), 0);
  Subprocess chief = cluster.Start(
      "bf16-refused", "chief", 0,
      {"--model=cnn", "--steps=10", "--precision=bf16", "--threads=1"});
  if (!cpu_has_bf16) {
    unsetenv("DNNL_MAX_CPU_ISA");
    EXPECT_EQ(chief.Wait(120), 2);
    EXPECT_TRUE(absl::StrContains(Log(chief), kRefusal)) << Log(chief);
    return;
  }
  ASSERT_EQ(setenv("DNNL_MAX_CPU_ISA", "AVX2", 1), 0);
  Subprocess worker =
      cluster.Start("bf16-refused", "worker", 0, {"--threads=1"});
  unsetenv("DNNL_MAX_CPU_ISA");
  EXPECT_NE(worker.Wait(120), 0);
  const std::string log = Log(worker);
  EXPECT_TRUE(absl::StrContains(log, kRefusal)) << log;
}

}  // namespace
}  // namespace testing
}  // namespace pstrain

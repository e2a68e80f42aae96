// Checkpoints across mesh shapes, in real processes: the ps tasks hold
// whole variables whatever the mesh (a tensor-parallel member pulls and
// pushes only its part of a split variable, ps/dense_part.h), so a
// checkpoint written under --mesh=data:2,model:2 resumes under
// data:4,model:1 and the reverse, by the chief's way of resuming a run:
// started again on the same --model_dir with more --steps, it restores the
// newest checkpoint and the workers go on from its step.
//
// The seed 000 MLP, SGD, 4 workers: 4 steps under data:4,model:1, 4 more
// under data:2,model:2, 4 more under data:4,model:1. From the checkpoint
// written under data:4,model:1, data:2,model:2 trains exactly what 2
// data-parallel workers of the same batch train from it (the same global
// batches: to ~1e-7); from the one written under data:2,model:2,
// data:4,model:1 trains what it trains from the 2 workers' checkpoint of
// the same step. Each worker's log states the bytes of
// weights and gradients its training loop holds: a member of a model:2 group
// half of each split variable, a data-parallel worker the whole. Processes on
// 127.0.0.1, ports picked at run time.
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/local_cluster.h"
#include "tests/subprocess.h"

namespace pstrain {
namespace testing {
namespace {

using Variables = std::map<std::string, std::vector<float>>;

constexpr char kLayout[] =
    R"({"d1/kernel": [null, "model"], "d1/bias": ["model"],
        "d2/kernel": ["model", null]})";
constexpr int kBatch = 32;

// The seed 000 MLP's variables: d1/kernel [784, 200], d2/kernel [200, 10],
// d2/bias [10]; weights and gradients of each, float32.
constexpr int64_t kWholeBytes = (784 * 200 + 200 * 10 + 10) * 2 * 4;
// A model:2 member's: half of d1/kernel (columns) and of d2/kernel (rows),
// d2/bias whole.
constexpr int64_t kMemberBytes = (784 * 100 + 100 * 10 + 10) * 2 * 4;

std::vector<std::string> ChiefFlags(const std::string& model_dir, int steps,
                                    const std::string& mesh,
                                    const std::string& layout) {
  std::vector<std::string> flags = {
      "--model=" + RunfilePath("examples/seed000_mlp.keras3.json"),
      "--optimizer=sgd",
      "--learning_rate=0.05",
      absl::StrCat("--steps=", steps),
      absl::StrCat("--batch_size=", kBatch),
      "--model_dir=" + model_dir,
      "--mesh=" + mesh};
  if (!layout.empty()) flags.push_back("--layout_map=" + layout);
  return flags;
}

// Trains `name` on `model_dir` (resuming from its newest checkpoint if it
// has one) and returns the newest checkpoint's variables.
Variables Train(const std::string& name, const std::string& model_dir,
                int workers, int steps, const std::string& mesh,
                const std::string& layout = "") {
  LocalCluster(/*num_ps=*/1, workers)
      .Run(name, ChiefFlags(model_dir, steps, mesh, layout));
  return ReadSafetensors(ExportSafetensors(model_dir, name));
}

// What worker `index` of run `name` logged: the step it resumed at (0 if
// it did not say) and the bytes its training loop holds (-1 if not said).
struct WorkerLog {
  int64_t resumed_at = 0;
  int64_t held_bytes = -1;
};
WorkerLog ReadWorkerLog(const std::string& name, int index) {
  const std::string log =
      ReadFile(TempPath(absl::StrCat(name, "-worker", index, ".log")));
  WorkerLog out;
  auto number_after = [&log](const std::string& text, int64_t* value) {
    const size_t at = log.find(text);
    if (at == std::string::npos) return;
    size_t end = at + text.size();
    while (end < log.size() && std::isdigit(log[end])) ++end;
    EXPECT_TRUE(absl::SimpleAtoi(
        log.substr(at + text.size(), end - at - text.size()), value));
  };
  number_after("resuming at step ", &out.resumed_at);
  number_after(": holds ", &out.held_bytes);
  return out;
}

void ExpectWorkers(const std::string& name, int64_t resumed_at,
                   int64_t held_bytes) {
  for (int w = 0; w < 4; ++w) {
    const WorkerLog log = ReadWorkerLog(name, w);
    EXPECT_EQ(log.resumed_at, resumed_at) << name << " worker " << w;
    EXPECT_EQ(log.held_bytes, held_bytes) << name << " worker " << w;
  }
}

TEST(TensorParallelCheckpoint, RestoresAcrossMeshShapesBothWays) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const std::string layout = TempPath("layout.json");
  ASSERT_TRUE(WriteFile(layout, kLayout));

  // data:4,model:1 for 4 steps; its model_dir copied, to go on from it two
  // ways.
  const std::string dp4 = TempPath("dp4-model");
  const Variables at4 = Train("dp4", dp4, 4, 4, "data:4,model:1");
  ExpectWorkers("dp4", 0, kWholeBytes);
  const std::string to_tp = TempPath("dp4-then-tp22-model");
  const std::string to_dp = TempPath("dp4-then-dp2-model");
  std::filesystem::copy(dp4, to_tp, std::filesystem::copy_options::recursive);
  std::filesystem::copy(dp4, to_dp, std::filesystem::copy_options::recursive);
  // ... under data:2,model:2, and as 2 data-parallel workers of the same
  // batch, which train the same global batches.
  const Variables tp22 =
      Train("dp4-then-tp22", to_tp, 4, 8, "data:2,model:2", layout);
  ExpectWorkers("dp4-then-tp22", 4, kMemberBytes);
  const Variables dp2 = Train("dp4-then-dp2", to_dp, 2, 8, "data:2,model:1");
  ASSERT_EQ(at4.size(), 3u);  // d1/kernel, d2/kernel, d2/bias
  const double restored_tp = LargestDifference(dp2, tp22);
  const double trained_on = LargestDifference(at4, tp22);

  // The checkpoints data:2,model:2 and the 2 workers wrote at step 8, each
  // on under data:4,model:1: the same.
  const Variables then_dp4 =
      Train("tp22-then-dp4", to_tp, 4, 12, "data:4,model:1");
  ExpectWorkers("tp22-then-dp4", 8, kWholeBytes);
  const Variables dp2_then_dp4 =
      Train("dp2-then-dp4", to_dp, 4, 12, "data:4,model:1");
  const double restored_dp4 = LargestDifference(dp2_then_dp4, then_dp4);
  const double dp4_trained_on = LargestDifference(tp22, then_dp4);
  std::printf(
      "from data:4,model:1 at step 4: data:2,model:2 vs 2 workers %g (moved "
      "%g); from data:2,model:2 at step 8: data:4,model:1 vs from 2 "
      "workers %g (moved %g)\n",
      restored_tp, trained_on, restored_dp4, dp4_trained_on);
  EXPECT_LE(restored_tp, 1e-5);
  EXPECT_LE(restored_dp4, 1e-5);
  // Training went on from the checkpoints (4 steps of SGD move the weights).
  EXPECT_GT(trained_on, 1e-4);
  EXPECT_GT(dp4_trained_on, 1e-4);
}

}  // namespace
}  // namespace testing
}  // namespace pstrain

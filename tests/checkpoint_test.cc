// Checkpoints of whole runs as real processes on 127.0.0.1: the chief writes
// them while the workers hold, keeps the newest, resumes from them with
// another number of ps tasks (the variables restored bit for bit), falls back
// from a damaged one, and exports one as safetensors.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// One run: a chief, `num_ps` ps tasks and two workers, logs named after
// `name`. Returns the chief's log; fails the test if any process fails.
std::string RunCluster(const std::string& name, int num_ps,
                       std::vector<std::string> chief_flags) {
  std::vector<std::string> flags = {"--model=mlp", "--batch_size=32",
                                    "--print_every_steps=10", "--threads=1"};
  flags.insert(flags.end(), chief_flags.begin(), chief_flags.end());
  return LocalCluster(num_ps, 2).Run(name, flags,
                                     {"--threads=1", "--report_every_steps=5"});
}

// The bytes of the safetensors export of model_dir's newest checkpoint.
std::string Export(const std::string& model_dir, const std::string& name) {
  return ReadFile(ExportSafetensors(model_dir, name));
}

void FlipByte(const std::string& path, int64_t offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  char c = 0;
  file.read(&c, 1);
  c ^= 0x01;
  file.seekp(offset);
  file.write(&c, 1);
}

TEST(Checkpoint, SyncRunWritesEveryTenStepsAndKeepsTheNewestTwo) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const std::string model_dir = TempPath("every-ten");
  const std::string log =
      RunCluster("every-ten", 2,
                 {"--steps=30", "--checkpoint_every_steps=10",
                  "--keep_checkpoints=2", "--model_dir=" + model_dir});
  for (int step : {10, 20, 30}) {
    EXPECT_NE(log.find(absl::StrCat("checkpoint at step ", step, " in ")),
              std::string::npos)
        << log;
  }
  EXPECT_FALSE(Exists(model_dir + "/ckpt-10"));
  EXPECT_TRUE(Exists(model_dir + "/ckpt-20/index.pb"));
  EXPECT_TRUE(Exists(model_dir + "/ckpt-30/index.pb"));
  EXPECT_TRUE(Exists(model_dir + "/ckpt-30/ps-1.data"));
}

TEST(Checkpoint, AsyncRunWritesCheckpointsWhileWorkersHold) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const std::string model_dir = TempPath("async");
  const std::string log =
      RunCluster("async", 1,
                 {"--mode=async", "--steps=20", "--checkpoint_every_steps=10",
                  "--model_dir=" + model_dir});
  EXPECT_NE(log.find("checkpoint at step 10 in "), std::string::npos) << log;
  EXPECT_TRUE(Exists(model_dir + "/ckpt-10/index.pb"));
  EXPECT_TRUE(Exists(model_dir + "/ckpt-20/index.pb"));
  EXPECT_FALSE(Export(model_dir, "async").empty());
}

TEST(Checkpoint, ResumeOnMorePsRestoresTheVariablesBitForBit) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const std::string model_dir = TempPath("resume");
  // An uninterrupted run to step 30, checkpointed at 20 and 30.
  RunCluster("resume-first", 2,
             {"--steps=30", "--checkpoint_every_steps=20",
              "--model_dir=" + model_dir});
  ASSERT_TRUE(Exists(model_dir + "/ckpt-20/index.pb"));
  const std::string at_30 = Export(model_dir, "resume-at-30");
  const nlohmann::json uninterrupted = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(uninterrupted.is_object());
  // As if the cluster had stopped right after the checkpoint of step 20.
  std::filesystem::remove_all(model_dir + "/ckpt-30");
  const std::string at_20 = Export(model_dir, "resume-at-20");
  ASSERT_GT(at_20.size(), 8u);

  // Resumed at its last step on 3 ps tasks: nothing trains, and the final
  // checkpoint, written from the restored state, is the same model.
  std::string log =
      RunCluster("resume-same", 3, {"--steps=20", "--model_dir=" + model_dir});
  EXPECT_NE(log.find("resuming from " + model_dir + "/ckpt-20 at step 20"),
            std::string::npos)
      << log;
  EXPECT_TRUE(Export(model_dir, "resume-restored") == at_20)
      << "the restored variables differ from the saved ones";

  // Training goes on from there to step 30, with the data where the
  // uninterrupted run had it: the same model.
  log =
      RunCluster("resume-more", 3, {"--steps=30", "--model_dir=" + model_dir});
  EXPECT_NE(log.find("resuming from " + model_dir + "/ckpt-20 at step 20"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("step 30/30"), std::string::npos) << log;
  EXPECT_TRUE(Exists(model_dir + "/ckpt-30/ps-2.data"));
  const nlohmann::json summary = nlohmann::json::parse(
      ReadFile(model_dir + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object());
  EXPECT_EQ(summary["global_step"], 30);
  EXPECT_EQ(summary["num_ps"], 3);
  EXPECT_EQ(summary["test_loss"], uninterrupted["test_loss"]);
  EXPECT_TRUE(Export(model_dir, "resume-30") == at_30)
      << "resumed training ends elsewhere than uninterrupted training";
}

TEST(Checkpoint, DamagedNewestCheckpointFallsBackToThePreviousOne) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
  const std::string model_dir = TempPath("damaged");
  RunCluster("damaged-first", 1,
             {"--steps=20", "--checkpoint_every_steps=10",
              "--model_dir=" + model_dir});
  ASSERT_TRUE(Exists(model_dir + "/ckpt-10/index.pb"));
  ASSERT_TRUE(Exists(model_dir + "/ckpt-20/index.pb"));
  FlipByte(model_dir + "/ckpt-20/ps-0.data", 100);

  const std::string log = RunCluster(
      "damaged-resume", 2, {"--steps=20", "--model_dir=" + model_dir});
  EXPECT_NE(log.find("checkpoint " + model_dir + "/ckpt-20 is damaged ("),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("CRC32C mismatch"), std::string::npos) << log;
  EXPECT_NE(log.find("falling back to the previous one"), std::string::npos);
  EXPECT_NE(log.find("resuming from " + model_dir + "/ckpt-10 at step 10"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("step 20/20"), std::string::npos) << log;
}

}  // namespace
}  // namespace testing
}  // namespace pstrain

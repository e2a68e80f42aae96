// Runs that lose a process: a worker, a ps task or the chief is killed with
// SIGKILL at a random step and started again at once (as Kubernetes would),
// or a ps stalls. Each run must complete with every global batch applied
// exactly once on every ps (the ps tasks count them: --count_batches), with
// a test accuracy within one point of an undisturbed run with the same
// seed, and every checkpoint it left must verify. Each test prints how long
// training took to get going again.
#include <signal.h>

#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chief/checkpoint_layout.h"
#include "chief/checkpoint_reader.h"
#include "chief/chief_client.h"
#include "common/cluster_spec.h"
#include "common/grpc_options.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/local_cluster.h"

namespace pstrain {
namespace testing {
namespace {

constexpr int kSteps = 300;

std::vector<std::string> ChiefFlags(const std::string& model_dir) {
  return {"--model=mlp",
          "--batch_size=64",
          absl::StrCat("--steps=", kSteps),
          "--seed=7",
          "--print_every_steps=10",
          "--threads=1",
          "--checkpoint_every_steps=50",
          "--failure_timeout=5s",
          "--model_dir=" + model_dir};
}
const std::vector<std::string> kWorkerFlags = {"--threads=1",
                                               "--report_every_steps=5"};

double TestAccuracy(const std::string& model_dir) {
  const nlohmann::json summary =
      nlohmann::json::parse(ReadFile(model_dir + "/summary.json"), nullptr,
                            /*allow_exceptions=*/false);
  if (!summary.is_object() || !summary.contains("test_accuracy")) return -1;
  return summary["test_accuracy"].get<double>();
}

// The highest step of the chief's progress lines ("step 120/300"); -1 if none.
int64_t LastStep(const std::string& log) {
  static const std::regex kProgress("step ([0-9]+)/[0-9]+");
  int64_t last = -1;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), kProgress);
       it != std::sregex_iterator(); ++it) {
    last = std::max<int64_t>(last, std::stoll((*it)[1]));
  }
  return last;
}

// Seconds until `done()` holds, polled every 20 ms; -1 after `limit`.
double SecondsUntil(const std::function<bool()>& done, double limit = 300) {
  const absl::Time start = absl::Now();
  while (!done()) {
    if (absl::Now() - start > absl::Seconds(limit)) return -1;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// The numbers of every match of `pattern`'s first group in `log`.
std::vector<int64_t> AllMatches(const std::string& log,
                                const std::string& pattern) {
  const std::regex re(pattern);
  std::vector<int64_t> found;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re);
       it != std::sregex_iterator(); ++it) {
    found.push_back(std::stoll((*it)[1]));
  }
  return found;
}

// A ps's --count_batches file: applications of each global batch.
std::map<int64_t, int> ReadLedger(const std::string& path) {
  std::map<int64_t, int> ledger;
  std::istringstream in(ReadFile(path));
  int64_t batch;
  int count;
  while (in >> batch >> count) ledger[batch] = count;
  return ledger;
}

void ExpectEveryCheckpointVerifies(const std::string& model_dir) {
  const std::vector<chief::CheckpointRef> all =
      chief::ListCompleteCheckpoints(model_dir);
  EXPECT_FALSE(all.empty()) << model_dir;
  for (const chief::CheckpointRef& ref : all) {
    absl::StatusOr<CheckpointIndex> index = chief::ReadCheckpointIndex(ref.dir);
    ASSERT_TRUE(index.ok()) << index.status();
    EXPECT_TRUE(chief::VerifyCheckpointData(ref.dir, *index).ok()) << ref.dir;
  }
}

// A run of a chief, 2 ps tasks and 2 workers as processes.
class ClusterRun {
 public:
  // `worker_flags` come after kWorkerFlags.
  explicit ClusterRun(const std::string& name,
                      std::vector<std::string> chief_flags = {},
                      std::vector<std::string> worker_flags = {})
      : name_(name),
        model_dir_(TempPath(name)),
        chief_flags_(std::move(chief_flags)),
        worker_flags_(std::move(worker_flags)),
        cluster_(2, 2) {
    for (int i = 0; i < 2; ++i) ps_.push_back(Start("ps", i));
    for (int i = 0; i < 2; ++i) workers_.push_back(Start("worker", i));
    chief_ = Start("chief", 0);
  }

  const std::string& model_dir() const { return model_dir_; }
  std::string chief_log() const { return Log(*chief_); }

  // Waits until the chief has reported step `step`.
  void WaitForStep(int64_t step) {
    ASSERT_GE(SecondsUntil([&] { return LastStep(chief_log()) >= step; }), 0)
        << chief_log();
  }

  // Kills `type`:`index` with SIGKILL; returns the chief's last reported
  // step before the kill.
  int64_t Kill(const std::string& type, int index) {
    const int64_t step = LastStep(chief_log());
    EXPECT_EQ(Task(type, index)->Stop(SIGKILL), 128 + SIGKILL);
    std::printf("killed %s %d after step %ld\n", type.c_str(), index,
                static_cast<long>(step));
    return step;
  }

  // Starts `type`:`index` again.
  void Restart(const std::string& type, int index) {
    Task(type, index) = Start(type, index, "-restarted");
    if (type == "ps") restarted_ps_.insert(index);
  }

  // Whether the chief's log says `text`.
  bool ChiefSaid(const std::string& text) const {
    return chief_log().find(text) != std::string::npos;
  }

  // Starts absent worker `index` again (--on_worker_failure=continue) and
  // waits until the chief has taken it back.
  void RestartAbsentWorker(int index) {
    Restart("worker", index);
    ASSERT_GE(SecondsUntil(
                  [&] {
                    return ChiefSaid(absl::StrCat("worker ", index, " is back"));
                  },
                  /*limit=*/60),
              0)
        << chief_log();
  }

  // Sends `signal` to `type`:`index` (SIGSTOP, SIGCONT).
  void Signal(const std::string& type, int index, int signal) {
    ASSERT_EQ(kill(Task(type, index)->pid(), signal), 0);
  }

  // The chief's address, for a test's own calls to it.
  std::string ChiefAddress() const {
    const nlohmann::json config =
        nlohmann::json::parse(cluster_.TfConfig("chief", 0));
    return config["cluster"]["chief"][0].get<std::string>();
  }

  int64_t KillAndRestart(const std::string& type, int index) {
    const int64_t step = Kill(type, index);
    Restart(type, index);
    return step;
  }

  // Waits for every process to exit 0.
  void Finish() {
    EXPECT_EQ(chief_->Wait(600), 0) << chief_log();
    for (auto& p : ps_) EXPECT_EQ(p->Wait(60), 0) << Log(*p);
    for (auto& p : workers_) EXPECT_EQ(p->Wait(60), 0) << Log(*p);
  }

  // After Finish: every global batch of the run (kSteps steps of 2
  // workers) was applied exactly once on each ps, as the ps tasks counted
  // (--count_batches). A ps that was restarted counts from the step it was
  // restored at.
  void ExpectEveryBatchAppliedOnce() {
    const std::vector<int64_t> restored =
        AllMatches(chief_log(), "restored [^ ]+ at step ([0-9]+)");
    for (int task = 0; task < 2; ++task) {
      const int64_t first_step =
          restarted_ps_.count(task) > 0 && !restored.empty() ? restored.back()
                                                             : 0;
      const std::map<int64_t, int> ledger = ReadLedger(ledger_[task]);
      int64_t wrong = 0;
      for (int64_t batch = 2 * first_step; batch < 2 * kSteps; ++batch) {
        auto it = ledger.find(batch);
        const int count = it == ledger.end() ? 0 : it->second;
        if (count != 1 && ++wrong <= 5) {
          ADD_FAILURE() << "ps " << task << ": batch " << batch << " (step "
                        << batch / 2 << ", worker " << batch % 2 << ") applied "
                        << count << " times";
        }
      }
      for (const auto& [batch, count] : ledger) {
        EXPECT_TRUE(batch >= 2 * first_step && batch < 2 * kSteps)
            << "ps " << task << " counted batch " << batch;
      }
      EXPECT_EQ(wrong, 0) << "ps " << task << ": " << wrong
                          << " batches not applied exactly once";
    }
  }

 private:
  std::unique_ptr<Subprocess>& Task(const std::string& type, int index) {
    return type == "ps" ? ps_[index] : type == "worker" ? workers_[index] : chief_;
  }

  std::unique_ptr<Subprocess> Start(const std::string& type, int index,
                                    const std::string& suffix = "") {
    std::vector<std::string> flags;
    if (type == "chief") {
      flags = ChiefFlags(model_dir_);
      flags.insert(flags.end(), chief_flags_.begin(), chief_flags_.end());
    }
    if (type == "worker") {
      flags = kWorkerFlags;
      flags.insert(flags.end(), worker_flags_.begin(), worker_flags_.end());
    }
    if (type == "ps") {
      ledger_[index] =
          TempPath(absl::StrCat(name_, suffix, "-ps", index, ".batches"));
      flags = {"--model_dir=" + model_dir_,
               "--count_batches=" + ledger_[index]};
    }
    return std::make_unique<Subprocess>(
        cluster_.Start(name_ + suffix, type, index, flags));
  }

  const std::string name_;
  const std::string model_dir_;
  const std::vector<std::string> chief_flags_;
  const std::vector<std::string> worker_flags_;
  const LocalCluster cluster_;
  std::vector<std::unique_ptr<Subprocess>> ps_, workers_;
  std::unique_ptr<Subprocess> chief_;
  // Each ps task's --count_batches file (its latest process's), and the
  // ps tasks restarted.
  std::map<int, std::string> ledger_;
  std::set<int> restarted_ps_;
};

class FailureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HaveFashionMnist()) return;
    ClusterRun run("undisturbed");
    run.Finish();
    run.ExpectEveryBatchAppliedOnce();
    undisturbed_accuracy_ = TestAccuracy(run.model_dir());
    std::printf("undisturbed run: test accuracy %.4f\n", undisturbed_accuracy_);
  }

  void SetUp() override {
    if (!HaveFashionMnist()) GTEST_SKIP() << "skipped: no " << kFashionMnistDir;
    ASSERT_GT(undisturbed_accuracy_, 0.5);
  }

  // A step to kill at, at random in [first, first + 140).
  static int64_t RandomStep(int64_t first = 60) {
    std::random_device random;
    return first + random() % 140;
  }

  // The run completes, every batch applied once on every ps, with the
  // accuracy of an undisturbed run.
  static void ExpectCompletedLikeUndisturbed(ClusterRun& run) {
    run.Finish();
    run.ExpectEveryBatchAppliedOnce();
    const double accuracy = TestAccuracy(run.model_dir());
    std::printf("test accuracy %.4f (undisturbed %.4f)\n", accuracy,
                undisturbed_accuracy_);
    EXPECT_NEAR(accuracy, undisturbed_accuracy_, 0.01);
    ExpectEveryCheckpointVerifies(run.model_dir());
  }

  static double undisturbed_accuracy_;
};
double FailureTest::undisturbed_accuracy_ = -1;

TEST_F(FailureTest, KilledWorkerRejoinsAndTheRunCompletes) {
  ClusterRun run("worker-killed");
  run.WaitForStep(RandomStep());
  const int64_t at = run.KillAndRestart("worker", 1);
  const double seconds =
      SecondsUntil([&] { return LastStep(run.chief_log()) > at; });
  std::printf("RECOVERY worker: training went past step %ld %.2f s after "
              "the kill\n",
              static_cast<long>(at), seconds);
  EXPECT_GE(seconds, 0);
  ExpectCompletedLikeUndisturbed(run);
  EXPECT_NE(run.chief_log().find("worker:1 restarted"), std::string::npos);
}

TEST_F(FailureTest, WithContinueTheOthersTrainADeadWorkersShareUntilItIsBack) {
  // Pushes slowed down so that the run outlasts a restarted worker's start
  // (several seconds for a debug build on a loaded machine): it must come
  // back well before the end.
  ClusterRun run("worker-continue", {"--on_worker_failure=continue"},
                 {"--push_delay_ms=30"});
  // Early enough that the others train its share for a while.
  run.WaitForStep(RandomStep(/*first=*/20) / 2);
  const int64_t at = run.Kill("worker", 1);
  const double seconds = SecondsUntil([&] {
    return run.ChiefSaid("going on without worker 1") &&
           LastStep(run.chief_log()) > at;
  });
  std::printf("RECOVERY worker (continue): training went past step %ld "
              "%.2f s after the kill\n",
              static_cast<long>(at), seconds);
  ASSERT_GE(seconds, 0) << run.chief_log();
  run.RestartAbsentWorker(1);
  ExpectCompletedLikeUndisturbed(run);
}

TEST_F(FailureTest, WithContinueARestartedChiefGoesOnWithoutAWorkerThatIsGone) {
  ClusterRun run("chief-without-worker", {"--on_worker_failure=continue"});
  run.WaitForStep(RandomStep(/*first=*/20) / 2);
  run.Kill("worker", 1);
  ASSERT_GE(SecondsUntil(
                [&] { return run.ChiefSaid("going on without worker 1"); }),
            0)
      << run.chief_log();
  // The restarted chief waits --failure_timeout (5 s) for worker 1, not
  // --wait_for_tasks_seconds (300 s), then trains without it.
  const int64_t at = run.KillAndRestart("chief", 0);
  const double seconds = SecondsUntil(
      [&] { return run.ChiefSaid("going on without worker 1 from the start"); },
      /*limit=*/120);
  std::printf(
      "RECOVERY chief without worker 1 (continue): the chief, "
      "restarted after step %ld, went on without it %.2f s later\n",
      static_cast<long>(at), seconds);
  ASSERT_GE(seconds, 0) << run.chief_log();
  // At once: the rest of the run takes a few seconds, and worker 1 must
  // come back before it ends.
  run.RestartAbsentWorker(1);
  ExpectCompletedLikeUndisturbed(run);
}

TEST_F(FailureTest, KilledPsIsRestoredFromTheLatestCheckpoint) {
  ClusterRun run("ps-killed");
  run.WaitForStep(RandomStep());
  const int64_t at = run.KillAndRestart("ps", 1);
  const double recovered = SecondsUntil(
      [&] { return run.chief_log().find("recovered in") != std::string::npos; });
  const double seconds =
      SecondsUntil([&] { return LastStep(run.chief_log()) > at; });
  std::printf("RECOVERY ps: restored %.2f s after the kill; training went "
              "past step %ld %.2f s after that\n",
              recovered, static_cast<long>(at), seconds);
  EXPECT_GE(recovered, 0) << run.chief_log();
  ExpectCompletedLikeUndisturbed(run);
  const std::string log = run.chief_log();
  EXPECT_NE(log.find("ps:1 restarted"), std::string::npos) << log;
  EXPECT_NE(log.find("steps are trained again"), std::string::npos) << log;
}

// A ps that stalls (SIGSTOP: silent to the chief and everyone, as behind a
// partition) for 15 s, well past --failure_timeout, still holds its shard:
// the chief waits for it and nothing is rolled back. A Register forged in
// ps 0's name, claiming a new process, makes the chief ask ps 0, which
// holds its shard: nothing happens either.
TEST_F(FailureTest, AStalledPsOrAForgedRegisterRollsNothingBack) {
  ClusterRun run("ps-stalled");
  run.WaitForStep(RandomStep());
  chief::ChiefClient forger(CreatePstrainChannel(run.ChiefAddress()),
                            MakeTask(JOB_PS, 0), "");
  const absl::StatusOr<RegisterResponse> forged =
      forger.Register(absl::Seconds(10));
  EXPECT_TRUE(forged.ok()) << forged.status();
  ASSERT_GE(SecondsUntil([&] {
              return run.ChiefSaid("ps:0 restarted") &&
                     run.ChiefSaid("ps:0 answers and still holds its shard");
            }),
            0)
      << run.chief_log();

  const int64_t at = LastStep(run.chief_log());
  run.Signal("ps", 1, SIGSTOP);
  absl::SleepFor(absl::Seconds(15));
  run.Signal("ps", 1, SIGCONT);
  std::printf("stalled ps 1 for 15 s after step %ld\n", static_cast<long>(at));
  ExpectCompletedLikeUndisturbed(run);
  const std::string log = run.chief_log();
  EXPECT_NE(log.find("ps:1 sent nothing for"), std::string::npos) << log;
  EXPECT_NE(log.find("ps:1 answers and still holds its shard"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("recovered in"), std::string::npos) << log;
  EXPECT_EQ(log.find("steps are trained again"), std::string::npos) << log;
}

// --on_worker_failure=continue: worker 1 dies and the others take its share;
// then the chief dies, and worker 1 comes back while there is no chief. The
// new chief finds every worker registered: the ps tasks must take its
// membership (worker 1 present again), or worker 1's pushes are refused
// forever and the run never ends.
TEST_F(FailureTest, WithContinueAWorkerBackDuringAChiefRestartIsTakenBack) {
  ClusterRun run("chief-and-worker-back", {"--on_worker_failure=continue"});
  run.WaitForStep(RandomStep(/*first=*/20) / 2);
  run.Kill("worker", 1);
  ASSERT_GE(
      SecondsUntil([&] { return run.ChiefSaid("going on without worker 1"); }),
      0)
      << run.chief_log();
  run.Kill("chief", 0);
  run.Restart("worker", 1);
  absl::SleepFor(absl::Seconds(2));
  run.Restart("chief", 0);
  ExpectCompletedLikeUndisturbed(run);
}

TEST_F(FailureTest, RestartedChiefTakesTheRunUpFromTheLatestCheckpoint) {
  ClusterRun run("chief-killed");
  run.WaitForStep(RandomStep());
  const int64_t at = run.KillAndRestart("chief", 0);
  const double resumed = SecondsUntil(
      [&] { return LastStep(run.chief_log()) >= 0; });
  const double seconds =
      SecondsUntil([&] { return LastStep(run.chief_log()) > at; });
  std::printf("RECOVERY chief: the restarted chief reported progress %.2f s "
              "after the kill; training went past step %ld %.2f s after "
              "that\n",
              resumed, static_cast<long>(at), seconds);
  EXPECT_GE(resumed, 0) << run.chief_log();
  ExpectCompletedLikeUndisturbed(run);
  EXPECT_NE(run.chief_log().find("resuming from " + run.model_dir()),
            std::string::npos)
      << run.chief_log();
}

}  // namespace
}  // namespace testing
}  // namespace pstrain

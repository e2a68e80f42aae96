// Unit tests of the worker's step loop against the chief's own RunState
// (through an in-process connection) and an in-memory variable store: which
// steps it pushes, in which generation, and how it goes on after a failed
// push, a restore, a restarted chief or a checkpoint hold. No process, no
// network; each runs in milliseconds.
#include "worker/trainer.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "chief/chief_client.h"
#include "chief/local_chief_connection.h"
#include "chief/run_state.h"
#include "collective/all_reducer.h"
#include "common/status_macros.h"
#include "common/tf_config.h"
#include "compute/cpu/model_test_util.h"
#include "gtest/gtest.h"
#include "ps/variable_store.h"
#include "tests/constant_backend.h"

namespace pstrain {
namespace worker {
namespace {

constexpr int kExamples = 32;
constexpr int kBatch = 4;
constexpr int64_t kSteps = kExamples / kBatch;  // one epoch

// A push the store received: its step and recovery generation.
struct Push {
  int64_t step;
  int64_t generation;
  bool operator==(const Push& other) const {
    return step == other.step && generation == other.generation;
  }
};

std::ostream& operator<<(std::ostream& out, const Push& push) {
  return out << "{step " << push.step << ", generation " << push.generation
             << "}";
}

// Dense variables in memory. Each push applies w -= 0.1 * g and is
// recorded; the push of one chosen step can fail once, after running a
// hook (what the chief does meanwhile).
class MemoryStore : public ps::VariableStore {
 public:
  void FailPushOnce(int64_t step, absl::Status status,
                    std::function<void()> hook = nullptr) {
    absl::MutexLock lock(&mu_);
    fail_step_ = step;
    fail_status_ = std::move(status);
    hook_ = std::move(hook);
  }
  std::vector<Push> pushes() const {
    absl::MutexLock lock(&mu_);
    return pushes_;
  }

  absl::Status PushDense(
      int64_t, int64_t,
      const std::map<std::string, Tensor*>& gradients) override {
    std::function<void()> hook;
    absl::Status failure;
    {
      absl::MutexLock lock(&mu_);
      if (step_ == fail_step_) {
        fail_step_ = -1;
        hook = std::move(hook_);
        failure = fail_status_;
      } else {
        pushes_.push_back({step_, generation_});
        for (const auto& [name, g] : gradients) {
          std::vector<float>& w = values_[name];
          w.resize(g->num_elements());
          for (size_t i = 0; i < w.size(); ++i) {
            w[i] -= 0.1f * g->flat<float>()[i];
          }
        }
      }
    }
    if (hook != nullptr) hook();
    return failure;
  }

  absl::StatusOr<int64_t> PullDense(
      int64_t min_version,
      const std::map<std::string, Tensor*>& values) override {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, t] : values) {
      std::vector<float>& w = values_[name];
      w.resize(t->num_elements());
      std::copy(w.begin(), w.end(), t->flat<float>().begin());
    }
    return min_version;
  }

  void set_generation(int64_t generation) override {
    absl::MutexLock lock(&mu_);
    generation_ = generation;
  }
  void set_step(int64_t step, const std::vector<int64_t>&, bool) override {
    absl::MutexLock lock(&mu_);
    step_ = step;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::vector<float>> values_ ABSL_GUARDED_BY(mu_);
  std::vector<Push> pushes_ ABSL_GUARDED_BY(mu_);
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t fail_step_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Status fail_status_ ABSL_GUARDED_BY(mu_);
  std::function<void()> hook_ ABSL_GUARDED_BY(mu_);
};

TrainingConfig Config() {
  TrainingConfig config;
  config.set_batch_size_per_worker(kBatch);
  config.set_epochs(1);
  config.set_seed(3);
  config.mutable_update()->set_mode(UpdateConfig::SYNC);
  config.mutable_update()->set_num_workers(1);
  return config;
}

ClusterSpec Cluster(bool collective) {
  absl::StatusOr<TfConfig> tf = ParseTfConfig(
      collective ? R"({"cluster": {"chief": ["h:1"], "worker": ["h:3"]},
                       "task": {"type": "chief", "index": 0}})"
                 : R"({"cluster": {"chief": ["h:1"], "ps": ["h:2"],
                       "worker": ["h:3"]},
                       "task": {"type": "chief", "index": 0}})");
  EXPECT_TRUE(tf.ok()) << tf.status();
  return tf->cluster;
}

// One worker's run of kSteps steps: the chief's RunState, reached in
// process, and the worker's store, backend and data.
// A collective worker's all-reducer (collective/all_reducer.h) whose join
// of generation `fail` fails as NCCL's does when a peer does not come; it
// records every generation it was asked to join. AllReduce is unused: the
// tests' store (MemoryStore) stands in for the replica.
class JoinFailingReducer : public collective::AllReducer {
 public:
  explicit JoinFailingReducer(int64_t fail) : fail_(fail) {}

  absl::Status Join(int64_t generation) override {
    absl::MutexLock lock(&mu_);
    joins_.push_back(generation);
    if (generation != fail_) return absl::OkStatus();
    return absl::DeadlineExceededError(absl::StrCat(
        "NCCL rendezvous: worker 1 did not join generation ", generation));
  }
  absl::Status AllReduce(uint64_t,
                         absl::Span<const absl::Span<float>>) override {
    return absl::UnimplementedError("not used");
  }
  void Shutdown() override {}

  std::vector<int64_t> joins() {
    absl::MutexLock lock(&mu_);
    return joins_;
  }

 private:
  const int64_t fail_;
  absl::Mutex mu_;
  std::vector<int64_t> joins_ ABSL_GUARDED_BY(mu_);
};

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(/*collective=*/false); }

  void Start(bool collective) {
    config_ = Config();
    spec_ = cpu::MustParse(cpu::KerasModel(
        "4", {cpu::KerasLayer("Dense", R"("name": "dense", "units": 2,
                                           "activation": "softmax")")}));
    train_.features = *Tensor::Create(DT_FLOAT, {kExamples, 4});
    for (float& v : train_.features.flat<float>()) v = 0.5f;
    train_.labels.assign(kExamples, 1);
    train_.num_classes = 2;
    EndsTheRun(state_.get(), false);
    state_ = NewState(collective);
    EndsTheRun(state_.get(), true);
    auto connection =
        std::make_unique<chief::LocalChiefConnection>(state_.get());
    connection_ = connection.get();
    chief_ = std::make_unique<chief::ChiefClient>(std::move(connection),
                                                  MakeTask(JOB_WORKER, 0));
    options_.report_every_steps = 3;
    options_.liveness_interval = absl::Milliseconds(5);
    options_.pause_poll = absl::Milliseconds(1);
    options_.resync_backoff.initial_backoff = absl::Milliseconds(1);
    options_.resync_backoff.max_backoff = absl::Milliseconds(5);
    options_.chief_patience = absl::Seconds(20);
  }

  std::unique_ptr<chief::RunState> NewState(bool collective) {
    auto state = std::make_unique<chief::RunState>(
        "run-1", config_, Placement(), Cluster(collective), kSteps, kSteps,
        collective);
    state->SetPhase(PHASE_TRAINING);
    return state;
  }

  absl::Status Register() {
    absl::StatusOr<RegisterResponse> registered =
        chief_->Register(absl::Seconds(1));
    if (!registered.ok()) return registered.status();
    options_.start_step = registered->state().start_step();
    options_.generation = registered->state().generation();
    options_.restore_pending = registered->state().restore_pending();
    return absl::OkStatus();
  }

  // Runs the worker's Trainer while the chiefs in ends_ (state_ unless a
  // test says otherwise) finish the run once every worker said it is done,
  // as the chief's Driver does.
  absl::Status RunTrainer() {
    absl::Notification trained;
    std::thread driver([&] {
      while (!trained.WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
        absl::MutexLock lock(&ends_mu_);
        for (chief::RunState* state : ends_) {
          if (state->AllWorkersFinished()) state->SetPhase(PHASE_FINISHED);
        }
      }
    });
    Trainer trainer(options_, &config_, &spec_, &train_, &backend_, &store_,
                    chief_.get());
    const absl::Status status = trainer.Run();
    trained.Notify();
    driver.join();
    return status;
  }

  // The run of `state` is ended by RunTrainer's stand-in for the Driver
  // (`ends`) or by the test.
  void EndsTheRun(chief::RunState* state, bool ends) {
    absl::MutexLock lock(&ends_mu_);
    if (ends) {
      ends_.push_back(state);
    } else {
      ends_.erase(std::remove(ends_.begin(), ends_.end(), state), ends_.end());
    }
  }

  static std::vector<Push> Steps(int64_t from, int64_t to, int64_t generation) {
    std::vector<Push> pushes;
    for (int64_t s = from; s < to; ++s) pushes.push_back({s, generation});
    return pushes;
  }

  TrainingConfig config_;
  ModelSpec spec_;
  data::Dataset train_;
  testing::ConstantBackend backend_;
  MemoryStore store_;
  std::unique_ptr<chief::RunState> state_;
  chief::LocalChiefConnection* connection_ = nullptr;
  std::unique_ptr<chief::ChiefClient> chief_;
  TrainerOptions options_;
  absl::Mutex ends_mu_;
  std::vector<chief::RunState*> ends_ ABSL_GUARDED_BY(ends_mu_);
};

TEST_F(TrainerTest, PushesEveryStepOnceAndTellsTheChief) {
  ASSERT_TRUE(Register().ok());
  ASSERT_TRUE(RunTrainer().ok());
  EXPECT_EQ(store_.pushes(), Steps(0, kSteps, 0));
  EXPECT_TRUE(state_->AllWorkersFinished());
  // The reports of every step reached the chief: one epoch's worth.
  chief::Progress epoch = state_->TakeEpochProgress(0, absl::Now());
  EXPECT_EQ(epoch.examples, kExamples);
  EXPECT_DOUBLE_EQ(epoch.loss_sum, 0.5 * kExamples);
}

TEST_F(TrainerTest, AFailedPushOfAPeerIsTrainedAgainAtTheSameStep) {
  ASSERT_TRUE(Register().ok());
  store_.FailPushOnce(3, absl::UnavailableError("ps:0 is down"));
  ASSERT_TRUE(RunTrainer().ok());
  EXPECT_EQ(store_.pushes(), Steps(0, kSteps, 0));
}

TEST_F(TrainerTest, AnErrorThatIsNoPeerFailureEndsTheRunNamingTheStep) {
  ASSERT_TRUE(Register().ok());
  store_.FailPushOnce(2, absl::InvalidArgumentError("gradient of 'x' is NaN"));
  const absl::Status status = RunTrainer();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "step 2")) << status;
  EXPECT_EQ(store_.pushes(), Steps(0, 2, 0));
  EXPECT_FALSE(state_->AllWorkersFinished());
}

TEST_F(TrainerTest, AfterTheChiefRestoredTheRunItGoesOnFromTheRestoredStep) {
  ASSERT_TRUE(Register().ok());
  // The chief restores the checkpoint of step 2 while step 5 fails.
  store_.FailPushOnce(5, absl::UnavailableError("ps:0 restarted"),
                      [this] { state_->Recovered(2, 1); });
  ASSERT_TRUE(RunTrainer().ok());
  std::vector<Push> expected = Steps(0, 5, 0);
  for (const Push& push : Steps(2, kSteps, 1)) expected.push_back(push);
  EXPECT_EQ(store_.pushes(), expected);
}

TEST_F(TrainerTest, ARestartedChiefIsJoinedAgainAndItsRestoreFollowed) {
  ASSERT_TRUE(Register().ok());
  // At step 4 the chief restarts: it knows no task, and restored step 2.
  std::unique_ptr<chief::RunState> restarted = NewState(false);
  restarted->Recovered(2, 1);
  EndsTheRun(restarted.get(), true);
  store_.FailPushOnce(4, absl::UnavailableError("the chief went away"),
                      [&] { connection_->Switch(restarted.get()); });
  ASSERT_TRUE(RunTrainer().ok());
  std::vector<Push> expected = Steps(0, 4, 0);
  for (const Push& push : Steps(2, kSteps, 1)) expected.push_back(push);
  EXPECT_EQ(store_.pushes(), expected);
  EXPECT_TRUE(restarted->AllWorkersFinished());
}

TEST_F(TrainerTest, AnUnreachableChiefIsWaitedFor) {
  ASSERT_TRUE(Register().ok());
  store_.FailPushOnce(3, absl::UnavailableError("ps:0 is down"), [this] {
    connection_->FailNext(200, absl::UnavailableError("chief unreachable"));
  });
  ASSERT_TRUE(RunTrainer().ok());
  EXPECT_EQ(store_.pushes(), Steps(0, kSteps, 0));
  EXPECT_GE(connection_->calls(), 200);
}

TEST_F(TrainerTest, HoldsAtTheCheckpointStepWhileItIsWritten) {
  ASSERT_TRUE(Register().ok());
  state_->SetPauseAtStep(5);
  std::vector<int64_t> saved;
  std::vector<size_t> pushed_when_saved;
  options_.save_checkpoint = [&](int64_t step) {
    saved.push_back(step);
    pushed_when_saved.push_back(store_.pushes().size());
    // The chief lets the workers go on once the checkpoint is written.
    state_->SetPauseAtStep(0);
    return absl::OkStatus();
  };
  ASSERT_TRUE(RunTrainer().ok());
  EXPECT_EQ(saved, (std::vector<int64_t>{5, kSteps}));
  EXPECT_EQ(pushed_when_saved, (std::vector<size_t>{5, kSteps}));
  EXPECT_EQ(store_.pushes(), Steps(0, kSteps, 0));
}

TEST_F(TrainerTest, ARestartedCollectiveWorkerTrainsOnlyFromTheRestore) {
  Start(/*collective=*/true);
  // The worker's first process reached step 3 and was killed; the new one
  // registers while the chief has not restored the run yet.
  chief::ChiefClient first(
      std::make_unique<chief::LocalChiefConnection>(state_.get()),
      MakeTask(JOB_WORKER, 0));
  ASSERT_TRUE(first.Register(absl::Seconds(1)).ok());
  ASSERT_TRUE(first.Heartbeat(3).ok());
  ASSERT_TRUE(Register().ok());
  EXPECT_TRUE(options_.restore_pending);
  absl::Mutex mu;
  std::vector<Push> restores;
  options_.restore = [&](int64_t step, int64_t generation) {
    absl::MutexLock lock(&mu);
    restores.push_back({step, generation});
    return absl::OkStatus();
  };
  std::thread chief([&] {
    absl::SleepFor(absl::Milliseconds(100));
    // Nothing was trained from the variables the new process starts with.
    EXPECT_TRUE(store_.pushes().empty());
    state_->Recovered(2, 1);
  });
  const absl::Status status = RunTrainer();
  chief.join();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(restores, (std::vector<Push>{{2, 1}}));
  EXPECT_EQ(store_.pushes(), Steps(2, kSteps, 1));
}

TEST_F(TrainerTest, WaitsForTheChiefToEndTheRunAndTrainsAgainFromARestore) {
  ASSERT_TRUE(Register().ok());
  // The worker trained every step; before the chief ends the run, it
  // restarts and goes back to the checkpoint of step 2.
  EndsTheRun(state_.get(), false);
  std::unique_ptr<chief::RunState> restarted = NewState(false);
  restarted->Recovered(2, 1);
  EndsTheRun(restarted.get(), true);
  std::thread chief([&] {
    while (!state_->AllWorkersFinished()) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    absl::SleepFor(absl::Milliseconds(20));
    connection_->Switch(restarted.get());
  });
  const absl::Status status = RunTrainer();
  chief.join();
  ASSERT_TRUE(status.ok()) << status;
  std::vector<Push> expected = Steps(0, kSteps, 0);
  for (const Push& push : Steps(2, kSteps, 1)) expected.push_back(push);
  EXPECT_EQ(store_.pushes(), expected);
  EXPECT_EQ(state_->phase(), PHASE_TRAINING);
  EXPECT_EQ(restarted->phase(), PHASE_FINISHED);
}

TEST_F(TrainerTest, ACollectiveWorkerWhoseJoinFailsAsksTheChiefAgain) {
  Start(/*collective=*/true);
  ASSERT_TRUE(Register().ok());
  JoinFailingReducer reducer(/*fail=*/1);
  absl::Mutex mu;
  std::vector<Push> restores;
  // As worker/main.cc's: the generation's all-reduce is joined first.
  options_.restore = [&](int64_t step, int64_t generation) -> absl::Status {
    PSTRAIN_RETURN_IF_ERROR(reducer.Join(generation));
    absl::MutexLock lock(&mu);
    restores.push_back({step, generation});
    return absl::OkStatus();
  };
  // A peer dies during step 5: the chief restores step 2 in generation 1,
  // whose join fails (the peer is not back).
  store_.FailPushOnce(5, absl::UnavailableError("ring: worker 1 is gone"),
                      [this] { state_->Recovered(2, 1); });
  std::thread chief([&] {
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while (reducer.joins().empty() && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    // The worker asks the chief again rather than exit: it still calls
    // (heartbeats) after its failed join.
    const int calls = connection_->calls();
    while (connection_->calls() < calls + 3 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    EXPECT_LT(absl::Now(), give_up)
        << "the worker stopped calling the chief after its failed join";
    // Nothing was trained in the generation that could not be joined.
    EXPECT_EQ(store_.pushes(), Steps(0, 5, 0));
    state_->Recovered(2, 2);
  });
  const absl::Status status = RunTrainer();
  chief.join();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(reducer.joins(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(restores, (std::vector<Push>{{2, 2}}));
  std::vector<Push> expected = Steps(0, 5, 0);
  for (const Push& push : Steps(2, kSteps, 2)) expected.push_back(push);
  EXPECT_EQ(store_.pushes(), expected);
}

TEST_F(TrainerTest, ACollectiveRestoreThatFailsOtherwiseEndsTheWorker) {
  Start(/*collective=*/true);
  ASSERT_TRUE(Register().ok());
  options_.restore = [](int64_t step, int64_t) -> absl::Status {
    return absl::DataLossError(
        absl::StrCat("checkpoint of step ", step, ": CRC32C mismatch"));
  };
  store_.FailPushOnce(5, absl::UnavailableError("ring: worker 1 is gone"),
                      [this] { state_->Recovered(2, 1); });
  const absl::Status status = RunTrainer();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_EQ(store_.pushes(), Steps(0, 5, 0));
}

}  // namespace
}  // namespace worker
}  // namespace pstrain

#include "compute/cpu/thread_count_tuner.h"

#include <functional>

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Runs `steps` steps of 100 examples, each taking `ms(many)` milliseconds
// per example on the setting the tuner asks for; returns how many of them
// ran on all threads.
int RunSteps(ThreadCountTuner& tuner, int steps,
             const std::function<double(bool)>& ms) {
  int on_many = 0;
  for (int i = 0; i < steps; ++i) {
    const bool many = tuner.UseManyThreads();
    on_many += many;
    tuner.Record(many, absl::Milliseconds(100 * ms(many)), 100);
  }
  return on_many;
}

TEST(ThreadCountTuner, StaysOnAllThreadsWhileTheyAreFaster) {
  ThreadCountTuner tuner;
  const int on_many =
      RunSteps(tuner, 2000, [](bool many) { return many ? 1.0 : 1.8; });
  EXPECT_EQ(tuner.switches(), 0);
  EXPECT_TRUE(tuner.UseManyThreads());
  // Probes of one thread become rare: intervals double up to kMaxInterval.
  EXPECT_GT(on_many, 2000 - 2 * 10);
}

TEST(ThreadCountTuner, MovesToOneThreadWhenItIsFaster) {
  ThreadCountTuner tuner;
  const int first = ThreadCountTuner::kFirstProbe;
  EXPECT_EQ(RunSteps(tuner, first, [](bool many) { return many ? 2.0 : 1.0; }),
            first);
  // The probe: its first step warms up, its last is timed.
  for (int i = 0; i < ThreadCountTuner::kProbeSteps; ++i) {
    EXPECT_FALSE(tuner.UseManyThreads());
    tuner.Record(false, absl::Milliseconds(100), 100);
  }
  EXPECT_EQ(tuner.switches(), 1);
  const int on_many =
      RunSteps(tuner, 1000, [](bool many) { return many ? 2.0 : 1.0; });
  EXPECT_FALSE(tuner.UseManyThreads());
  EXPECT_EQ(tuner.switches(), 1);
  EXPECT_LT(on_many, 2 * 10);
}

TEST(ThreadCountTuner, DoesNotTimeAProbesWarmUpStep) {
  ThreadCountTuner tuner;
  RunSteps(tuner, ThreadCountTuner::kFirstProbe, [](bool) { return 2.0; });
  // One thread's first step makes its primitives: slow, and not counted.
  tuner.Record(false, absl::Seconds(10), 100);
  tuner.Record(false, absl::Milliseconds(100), 100);
  EXPECT_EQ(tuner.switches(), 1);
  EXPECT_FALSE(tuner.UseManyThreads());
}

TEST(ThreadCountTuner, ReturnsToAllThreadsWhenTheCoresAreFreeAgain) {
  ThreadCountTuner tuner;
  RunSteps(tuner, 200, [](bool many) { return many ? 2.0 : 1.0; });
  ASSERT_FALSE(tuner.UseManyThreads());
  // The other process ends: all threads are faster again, and the next
  // probe (within kFirstInterval doubled a few times) finds it.
  RunSteps(tuner, 2 * ThreadCountTuner::kMaxInterval + 10,
      [](bool many) { return many ? 0.6 : 1.0; });
  EXPECT_TRUE(tuner.UseManyThreads());
  EXPECT_EQ(tuner.switches(), 2);
}

TEST(ThreadCountTuner, KeepsTheSettingWhenTheOtherIsOnlySlightlyFaster) {
  ThreadCountTuner tuner;
  RunSteps(tuner, 1000, [](bool many) { return many ? 1.0 : 0.95; });
  EXPECT_EQ(tuner.switches(), 0);
  EXPECT_TRUE(tuner.UseManyThreads());
}

TEST(ThreadCountTuner, IgnoresEmptyStepsAndStepsOfTheOtherSetting) {
  ThreadCountTuner tuner;
  for (int i = 0; i < 100; ++i) {
    tuner.Record(true, absl::Milliseconds(100), 0);
    tuner.Record(false, absl::Milliseconds(1), 100);
  }
  // Neither counted towards a probe: still before the first one.
  EXPECT_TRUE(tuner.UseManyThreads());
  EXPECT_EQ(RunSteps(tuner, ThreadCountTuner::kFirstProbe,
                [](bool many) { return many ? 2.0 : 1.0; }),
            ThreadCountTuner::kFirstProbe);
  EXPECT_FALSE(tuner.UseManyThreads());
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

#include "chief/chief_metrics.h"

#include <string>

#include "common/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace chief {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ChiefMetrics, EvaluationAndLossHaveNoSampleUntilReported) {
  MetricsRegistry registry;
  ChiefMetrics metrics(&registry, /*state=*/nullptr);
  const std::string before = registry.Render();
  EXPECT_THAT(before, Not(HasSubstr("\npstrain_chief_eval_loss ")));
  EXPECT_THAT(before, Not(HasSubstr("\npstrain_chief_train_loss ")));
  metrics.SetEvaluation(0.5, 0.75);
  metrics.SetProgress(0.25, 0.875, 1000);
  const std::string after = registry.Render();
  EXPECT_THAT(after, HasSubstr("\npstrain_chief_eval_loss 0.5\n"));
  EXPECT_THAT(after, HasSubstr("\npstrain_chief_eval_accuracy 0.75\n"));
  EXPECT_THAT(after, HasSubstr("\npstrain_chief_train_loss 0.25\n"));
  EXPECT_THAT(after, HasSubstr("\npstrain_chief_examples_per_second 1000\n"));
}

TEST(ChiefMetrics, CountsFailuresByJobCheckpointsAndRestores) {
  MetricsRegistry registry;
  ChiefMetrics metrics(&registry, nullptr);
  metrics.SetStep(120, 2);
  metrics.CountFailure("worker");
  metrics.CountFailure("worker");
  metrics.CountFailure("ps");
  metrics.CountRestore();
  metrics.CountCheckpoint(100);
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("\npstrain_chief_global_step 120\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_chief_epoch 2\n"));
  EXPECT_THAT(text,
              HasSubstr("pstrain_chief_task_failures_total{job=\"worker\"} 2\n"));
  EXPECT_THAT(text,
              HasSubstr("pstrain_chief_task_failures_total{job=\"ps\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_chief_restores_total 1\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_chief_checkpoints_total 1\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_chief_checkpoint_step 100\n"));
  EXPECT_THAT(text, Not(HasSubstr("pstrain_chief_checkpoint_timestamp_seconds 0\n")));
}

}  // namespace
}  // namespace chief
}  // namespace pstrain

#include "chief/chief_metrics.h"

#include <map>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace pstrain {
namespace chief {
namespace {

Gauge* NewGauge(MetricsRegistry* registry, const std::string& name,
                const std::string& help) {
  return registry->AddGauge(name, help)->Get();
}

GaugeFamily* NewFamily(MetricsRegistry* registry, const std::string& name,
                       const std::string& help) {
  return registry->AddGauge(name, help);
}

}  // namespace

ChiefMetrics::ChiefMetrics(MetricsRegistry* registry, const RunState* state)
    : step_(NewGauge(registry, "pstrain_chief_global_step",
                     "Steps every worker has completed.")),
      epoch_(NewGauge(registry, "pstrain_chief_epoch",
                      "The epoch under way (from 1).")),
      loss_(NewFamily(registry, "pstrain_chief_train_loss",
                      "Training loss over the latest progress interval.")),
      accuracy_(NewFamily(registry, "pstrain_chief_train_accuracy",
                          "Training accuracy over the latest progress "
                          "interval (0 to 1).")),
      examples_per_sec_(NewFamily(registry, "pstrain_chief_examples_per_second",
                                  "Examples trained per second, all workers, "
                                  "over the latest progress interval.")),
      eval_loss_(NewFamily(registry, "pstrain_chief_eval_loss",
                           "Test-set loss of the latest evaluation.")),
      eval_accuracy_(NewFamily(registry, "pstrain_chief_eval_accuracy",
                               "Test-set accuracy of the latest evaluation.")),
      failures_(registry->AddCounter("pstrain_chief_task_failures_total",
                                     "Tasks presumed dead, by job.", {"job"})),
      restores_(registry
                    ->AddCounter("pstrain_chief_restores_total",
                                 "Recoveries: the ps tasks restored from a "
                                 "checkpoint after one lost its shard.")
                    ->Get()),
      checkpoints_(registry
                       ->AddCounter("pstrain_chief_checkpoints_total",
                                    "Checkpoints written.")
                       ->Get()),
      checkpoint_step_(NewGauge(registry, "pstrain_chief_checkpoint_step",
                                "Step of the latest checkpoint written.")),
      checkpoint_time_(NewGauge(
          registry, "pstrain_chief_checkpoint_timestamp_seconds",
          "When the latest checkpoint was written, since the Unix epoch "
          "(its age: time() - this).")) {
  if (state == nullptr) return;
  GaugeFamily* alive = registry->AddGauge(
      "pstrain_chief_task_alive",
      "1 for a registered task heard from lately, 0 for one presumed dead.",
      {"task"});
  registry->AddCollector([state, alive] {
    for (const auto& [task, up] : state->TasksAlive()) {
      alive->Get({task})->Set(up ? 1 : 0);
    }
  });
}

void ChiefMetrics::SetStep(int64_t step, int64_t epoch) {
  step_->Set(step);
  epoch_->Set(epoch);
}

void ChiefMetrics::SetProgress(double loss, double accuracy,
                               double examples_per_sec) {
  loss_->Get()->Set(loss);
  accuracy_->Get()->Set(accuracy);
  examples_per_sec_->Get()->Set(examples_per_sec);
}

void ChiefMetrics::SetEvaluation(double loss, double accuracy) {
  eval_loss_->Get()->Set(loss);
  eval_accuracy_->Get()->Set(accuracy);
}

void ChiefMetrics::CountFailure(const std::string& job) {
  failures_->Get({job})->Increment();
}

void ChiefMetrics::CountCheckpoint(int64_t step) {
  checkpoints_->Increment();
  checkpoint_step_->Set(step);
  checkpoint_time_->Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
}

}  // namespace chief
}  // namespace pstrain

#include "chief/evaluator.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "chief/checkpoint_layout.h"
#include "chief/checkpoint_reader.h"
#include "common/process.h"
#include "common/retry.h"
#include "common/status_macros.h"

namespace pstrain {
namespace chief {

Evaluator::Evaluator(EvaluatorOptions options, const RegisterResponse* run,
                     ChiefClient* chief, CheckpointEvaluation* evaluation)
    : options_(std::move(options)),
      run_(run),
      chief_(chief),
      evaluation_(evaluation) {
  const int64_t per_epoch = run_->state().steps_per_epoch();
  const TrainingConfig& config = run_->config();
  total_steps_ = config.steps() > 0 ? config.steps() : config.epochs() * per_epoch;
}

absl::Status Evaluator::EvaluateNewCheckpoints() {
  const int64_t per_epoch = run_->state().steps_per_epoch();
  std::vector<CheckpointRef> refs = ListCompleteCheckpoints(options_.model_dir);
  std::sort(refs.begin(), refs.end(),
            [](const CheckpointRef& a, const CheckpointRef& b) {
              return a.step < b.step;
            });
  for (const CheckpointRef& ref : refs) {
    const bool epoch_end =
        ref.step == total_steps_ || (per_epoch > 0 && ref.step % per_epoch == 0);
    if (ref.step <= last_step_ || !epoch_end) continue;
    const absl::Time start = absl::Now();
    PSTRAIN_ASSIGN_OR_RETURN(std::optional<ReadCheckpoint> read,
                             ReadCheckpointUnlessPruned(ref.dir));
    if (!read.has_value()) {
      LogInfo(absl::StrCat("evaluator: ", ref.dir,
                           " was pruned before it could be read; skipping it"));
      continue;
    }
    if (read->index.run_id() != run_->run_id()) continue;  // another run's
    absl::StatusOr<Evaluation> evaluated = evaluation_->Evaluate(*read);
    if (!evaluated.ok()) {
      return absl::Status(
          evaluated.status().code(),
          absl::StrCat(ref.dir, ": ", evaluated.status().message()));
    }
    const Evaluation& eval = *evaluated;
    const double seconds =
        std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start));
    ReportMetricsRequest report;
    report.set_step(ref.step);
    report.set_loss(eval.loss);
    report.set_accuracy(eval.accuracy);
    if (eval.auc.has_value()) report.set_auc(*eval.auc);
    report.set_examples_per_sec(eval.examples / seconds);
    report.set_num_steps(1);
    report.set_evaluation(true);
    RetryOptions retry;
    retry.retry_for = options_.chief_patience;
    PSTRAIN_RETURN_IF_ERROR(Retry(
        retry, [&] { return chief_->ReportMetrics(report).status(); }));
    LogInfo(absl::StrFormat("evaluator: %s (step %d): %s", ref.dir, ref.step,
                            FormatEvaluation(eval)));
    last_step_ = ref.step;
  }
  return absl::OkStatus();
}

absl::Status Evaluator::Run() {
  absl::Time last_answer = absl::Now();
  while (true) {
    absl::StatusOr<HeartbeatResponse> beat = chief_->Heartbeat(0);
    const bool over = beat.ok() && (beat->phase() == PHASE_FINISHED ||
                                    beat->phase() == PHASE_FAILED);
    if (beat.ok()) last_answer = absl::Now();
    PSTRAIN_RETURN_IF_ERROR(EvaluateNewCheckpoints());
    if (over) {
      return beat->phase() == PHASE_FINISHED
                 ? absl::OkStatus()
                 : absl::AbortedError("the chief failed the run");
    }
    if (absl::Now() - last_answer > options_.chief_patience) {
      return absl::UnavailableError(absl::StrCat(
          "the chief did not answer for ",
          absl::FormatDuration(options_.chief_patience), ": ",
          beat.status().message()));
    }
    absl::SleepFor(options_.poll);
  }
}

}  // namespace chief
}  // namespace pstrain

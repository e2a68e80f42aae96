#include "worker/trainer.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/process.h"
#include "common/status_macros.h"
#include "ps/staleness.h"
#include "worker/data/prefetcher.h"
#include "worker/data/shard_plan.h"

namespace pstrain {
namespace worker {
namespace {

data::ShardOptions PlanOptions(const TrainingConfig& config, int num_workers,
                               int worker_index) {
  data::ShardOptions options;
  options.num_workers = num_workers;
  options.worker_index = worker_index;
  options.batch_size = config.batch_size_per_worker();
  options.drop_remainder = true;
  options.shuffle = true;
  options.seed = config.seed();
  return options;
}

absl::Status AtStep(int64_t step, absl::string_view what,
                    const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("step ", step, ": ", what,
                                                  ": ", status.message()));
}

}  // namespace

absl::StatusOr<RunLength> ComputeRunLength(const TrainingConfig& config,
                                           int num_workers,
                                           int64_t num_examples) {
  PSTRAIN_ASSIGN_OR_RETURN(
      data::ShardPlan plan,
      data::ShardPlan::Create(num_examples, PlanOptions(config, num_workers, 0)));
  RunLength length;
  length.steps_per_epoch = plan.steps_per_epoch();
  if (length.steps_per_epoch == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        num_examples, " examples do not fill one step of ", num_workers,
        " workers x batch ", config.batch_size_per_worker()));
  }
  length.total_steps = config.steps() > 0
                           ? config.steps()
                           : config.epochs() * length.steps_per_epoch;
  return length;
}

Trainer::Trainer(TrainerOptions options, const TrainingConfig* config,
                 const ModelSpec* spec, const data::Dataset* train,
                 Backend* backend, ps::PsClusterClient* ps,
                 chief::ChiefClient* chief)
    : options_(options),
      config_(config),
      spec_(spec),
      train_(train),
      backend_(backend),
      ps_(ps),
      chief_(chief) {}

absl::Status Trainer::Run() {
  PSTRAIN_ASSIGN_OR_RETURN(
      data::ShardPlan plan,
      data::ShardPlan::Create(
          train_->size(),
          PlanOptions(*config_, options_.num_workers, options_.worker_index)));
  PSTRAIN_ASSIGN_OR_RETURN(
      RunLength length,
      ComputeRunLength(*config_, options_.num_workers, train_->size()));
  const int64_t start = options_.start_step;
  if (start < 0 || start > length.total_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start step ", start, " is outside the run's ", length.total_steps,
        " steps"));
  }
  if (start == length.total_steps) {
    PSTRAIN_RETURN_IF_ERROR(chief_->TrainingFinished(start).status());
    return absl::OkStatus();
  }
  // The data order is per epoch, from the seed: a resumed run starts in the
  // epoch of its start step and skips the batches already trained on.
  data::PrefetchOptions prefetch;
  prefetch.first_epoch = start / length.steps_per_epoch;
  prefetch.num_epochs =
      (length.total_steps + length.steps_per_epoch - 1) /
          length.steps_per_epoch -
      prefetch.first_epoch;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<data::Prefetcher> batches,
                           data::Prefetcher::Create(train_, plan, prefetch));
  for (int64_t skip = start % length.steps_per_epoch; skip > 0; --skip) {
    absl::StatusOr<data::Batch*> batch = batches->Next();
    if (!batch.ok()) return AtStep(start, "skipping data", batch.status());
    batches->Release(*batch);
  }

  // Weights and gradients, allocated once.
  std::vector<Tensor> storage;
  storage.reserve(2 * spec_->variables.size());
  Weights weights;
  Gradients gradients;
  std::map<std::string, Tensor*> pull;
  for (const VariableDef& def : spec_->variables) {
    const std::vector<int64_t> shape(def.shape().dims().begin(),
                                     def.shape().dims().end());
    PSTRAIN_ASSIGN_OR_RETURN(Tensor w, Tensor::Create(DT_FLOAT, shape));
    PSTRAIN_ASSIGN_OR_RETURN(Tensor g, Tensor::Create(DT_FLOAT, shape));
    storage.push_back(std::move(w));
    pull[def.name()] = &storage.back();
    weights[def.name()] = &storage.back();
    storage.push_back(std::move(g));
    gradients[def.name()] = &storage.back();
  }

  const bool sync = config_->update().mode() == UpdateConfig::SYNC;
  int64_t stale_pushes = 0;
  int64_t window_steps = 0, window_examples = 0, window_correct = 0;
  double window_loss = 0;
  absl::Time window_start = absl::Now();
  for (int64_t step = start; step < length.total_steps; ++step) {
    PSTRAIN_RETURN_IF_ERROR(WaitUntilMayStart(step));
    absl::StatusOr<data::Batch*> batch = batches->Next();
    if (!batch.ok()) return AtStep(step, "reading the data", batch.status());
    absl::StatusOr<int64_t> version = ps_->PullDense(sync ? step : 0, pull);
    if (!version.ok()) return AtStep(step, "pulling", version.status());
    StepInput input;
    input.features = (*batch)->features.raw_data();
    input.labels = (*batch)->labels.data<int32_t>();
    input.batch = (*batch)->size();
    input.step = step;
    input.example_offset = options_.worker_index * input.batch;
    input.weights_version = *version;
    absl::StatusOr<StepResult> result =
        backend_->TrainStep(input, weights, &gradients);
    batches->Release(*batch);
    if (!result.ok()) return AtStep(step, "computing", result.status());
    absl::SleepFor(options_.push_delay);
    absl::Status pushed =
        ps_->PushDense(sync ? step : *version, result->examples, gradients);
    if (!sync && ps::IsStaleGradient(pushed)) {
      // Other workers moved the variables too far meanwhile: this step's
      // gradient is dropped (the ps refused it whole) and the next step
      // pulls fresh values.
      ++stale_pushes;
    } else if (!pushed.ok()) {
      return AtStep(step, "pushing", pushed);
    }

    ++window_steps;
    window_examples += result->examples;
    window_correct += result->correct;
    window_loss += result->loss_sum + result->examples * result->l2_loss;
    const bool last = step + 1 == length.total_steps;
    if (window_steps == options_.report_every_steps || last) {
      const double seconds =
          std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - window_start));
      ReportMetricsRequest metrics;
      metrics.set_step(step + 1);
      metrics.set_loss(window_loss / std::max<int64_t>(1, window_examples));
      metrics.set_accuracy(static_cast<double>(window_correct) /
                           std::max<int64_t>(1, window_examples));
      metrics.set_examples_per_sec(window_examples / seconds);
      metrics.set_num_steps(window_steps);
      absl::StatusOr<ReportMetricsResponse> reply =
          chief_->ReportMetrics(metrics);
      if (!reply.ok()) return AtStep(step, "reporting", reply.status());
      if (reply->phase() == PHASE_FAILED) {
        return absl::AbortedError(absl::StrCat("step ", step,
                                               ": the chief failed the run"));
      }
      window_steps = window_examples = window_correct = 0;
      window_loss = 0;
      window_start = absl::Now();
    }
  }
  if (stale_pushes > 0) {
    LogInfo(absl::StrCat("worker ", options_.worker_index, ": ", stale_pushes,
                         " of ", length.total_steps - start,
                         " gradients were refused as too stale"));
  }
  absl::StatusOr<TrainingFinishedResponse> done =
      chief_->TrainingFinished(length.total_steps);
  if (!done.ok()) return AtStep(length.total_steps, "finishing", done.status());
  return absl::OkStatus();
}

absl::Status Trainer::WaitUntilMayStart(int64_t step) {
  bool held = false;
  while (true) {
    absl::StatusOr<HeartbeatResponse> beat = chief_->Heartbeat(step);
    if (!beat.ok()) return AtStep(step, "heartbeat", beat.status());
    if (beat->phase() == PHASE_FAILED) {
      return absl::AbortedError(
          absl::StrCat("step ", step, ": the chief failed the run"));
    }
    if (beat->pause_at_step() == 0 || beat->pause_at_step() != step) {
      if (held) {
        LogInfo(absl::StrCat("worker ", options_.worker_index,
                             ": going on at step ", step));
      }
      return absl::OkStatus();
    }
    if (!held) {
      LogInfo(absl::StrCat("worker ", options_.worker_index,
                           ": holding at step ", step, " for a checkpoint"));
      held = true;
    }
    absl::SleepFor(options_.pause_poll);
  }
}

}  // namespace worker
}  // namespace pstrain

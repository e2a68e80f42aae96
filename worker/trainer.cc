#include "worker/trainer.h"

#include <cmath>
#include <functional>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "chief/evaluation.h"
#include "chief/membership.h"
#include "common/process.h"
#include "common/retry.h"
#include "common/status_context.h"
#include "common/status_macros.h"
#include "data/model_input.h"
#include "data/prefetcher.h"
#include "data/shard_plan.h"
#include "model/dynamic_embeddings.h"
#include "ps/staleness.h"
#include "worker/trainer_buffers.h"

namespace pstrain {
namespace worker {
namespace {

// A call run on another thread while the caller does something else; the
// caller's Wait() (or the destructor, on every way out) waits for it.
class Beside {
 public:
  Beside(ThreadPool& pool, std::function<absl::Status()> work) {
    pool.Schedule([this, work = std::move(work)] {
      status_ = work();
      done_.Notify();
    });
  }
  ~Beside() { done_.WaitForNotification(); }

  absl::Status Wait() {
    done_.WaitForNotification();
    return status_;
  }

 private:
  absl::Notification done_;
  absl::Status status_;
};

}  // namespace

absl::Status Trainer::AtStep(int64_t step, absl::string_view what,
                             const absl::Status& status) {
  return WithContext(absl::StrCat("step ", step, ": ", what), status);
}

absl::Status Trainer::ChiefFailure(const absl::Status& status) {
  if (!absl::IsNotFound(status)) return status;
  return absl::AbortedError(status.message());
}

absl::Status Trainer::RunFailed(int64_t step) {
  return absl::FailedPreconditionError(
      absl::StrCat("step ", step, ": the chief failed the run"));
}

Trainer::Trainer(TrainerOptions options, const TrainingConfig* config,
                 const ModelSpec* spec, const data::Dataset* train,
                 Backend* backend, ps::VariableStore* variables,
                 chief::ChiefClient* chief)
    : options_(options),
      config_(config),
      spec_(spec),
      train_(train),
      backend_(backend),
      ps_(variables),
      chief_(chief) {}

void Trainer::SetGeneration(int64_t generation) {
  generation_ = generation;
  ps_->set_generation(generation);
  chief_->set_generation(generation);
}

absl::Status Trainer::Run() {
  const bool streamed = options_.open_stream != nullptr;
  const int64_t num_examples =
      streamed ? options_.stream_examples : train_->size();
  const int shards =
      options_.data_shards > 0 ? options_.data_shards : options_.num_workers;
  const int shard =
      options_.data_shard >= 0 ? options_.data_shard : options_.worker_index;
  PSTRAIN_ASSIGN_OR_RETURN(
      data::ShardPlan plan,
      data::ShardPlan::Create(num_examples,
                              data::RunShardOptions(*config_, shards, shard)));
  PSTRAIN_ASSIGN_OR_RETURN(
      data::RunLength length,
      data::ComputeRunLength(*config_, shards, num_examples));
  Position at{options_.start_step, options_.generation};
  if (at.step < 0 || at.step > length.total_steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("start step ", at.step, " is outside the run's ",
                     length.total_steps, " steps"));
  }
  if (!streamed && data::FeedDtype(*train_) != ModelFeedDtype(*spec_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the training data's features are ",
        DataTypeName(data::FeedDtype(*train_)), ", but the model takes ",
        DataTypeName(ModelFeedDtype(*spec_)), " (FitDatasetToModel)"));
  }
  // A growing table's mirror holds every id the step's batches can name:
  // this worker's and those of the absent workers it covers.
  const int64_t batch_rows =
      int64_t{config_->batch_size_per_worker()} * options_.num_workers;
  PSTRAIN_ASSIGN_OR_RETURN(
      sparse_, SparseTables::Create(
                   *spec_, options_.placement, options_.embedding_ps,
                   config_->update().mode() == UpdateConfig::SYNC, batch_rows));
  const ModelSpec local = WithLocalTables(*spec_, batch_rows);
  Buffers buffers;
  buffers.storage.reserve(2 * local.variables.size());
  PSTRAIN_RETURN_IF_ERROR(ps_->HoldParts(options_.parts));
  int64_t held_bytes = 0;
  for (const VariableDef& def : local.variables) {
    const std::vector<int64_t> shape = ps::HeldShape(def, options_.parts);
    PSTRAIN_ASSIGN_OR_RETURN(Tensor w, Tensor::Create(DT_FLOAT, shape));
    held_bytes += 2 * w.num_bytes();
    PSTRAIN_ASSIGN_OR_RETURN(Tensor g, Tensor::Create(DT_FLOAT, shape));
    const bool sparse = sparse_->Holds(def.name());
    buffers.storage.push_back(std::move(w));
    (sparse ? buffers.mirrors : buffers.pull)[def.name()] =
        &buffers.storage.back();
    buffers.weights[def.name()] = &buffers.storage.back();
    buffers.storage.push_back(std::move(g));
    buffers.gradients[def.name()] = &buffers.storage.back();
    if (!sparse) buffers.push[def.name()] = &buffers.storage.back();
  }
  LogInfo(absl::StrCat("worker ", options_.worker_index, ": holds ", held_bytes,
                       " bytes of weights and gradients"));

  // Heartbeats that carry no step: the chief hears from this worker while
  // a step waits for its peers, and a restarted chief gets it back even
  // then (its restore then ends the wait).
  absl::Notification done;
  std::thread liveness([this, &done] {
    while (!done.WaitForNotificationWithTimeout(options_.liveness_interval)) {
      absl::StatusOr<HeartbeatResponse> beat = chief_->Heartbeat(-1);
      if (beat.ok()) heard_phase_ = beat->phase();
      if (absl::IsNotFound(beat.status())) {
        chief_->Register(options_.liveness_interval).IgnoreError();
      }
    }
  });
  absl::Status status;
  SetGeneration(at.generation);
  // A restarted collective worker's replica is gone, and its peers are
  // further on: it waits for the chief to restore every worker.
  bool resync = options_.restore != nullptr && options_.restore_pending;
  if (resync) {
    LogInfo(absl::StrCat("worker ", options_.worker_index,
                         ": restarted mid-run; waiting for the chief to "
                         "restore the collective run"));
  } else if (options_.restore != nullptr && at.step > 0) {
    status = Restore(at, &resync);
  }
  while (status.ok()) {
    if (!resync && at.step < length.total_steps) {
      status = TrainFrom(plan, length, buffers, &at.step);
      if (!status.ok()) {
        if (!IsPeerFailure(status)) break;
        LogInfo(absl::StrCat("worker ", options_.worker_index, ": ",
                             status.message(),
                             "; asking the chief how to go on"));
        if (options_.metrics != nullptr) options_.metrics->resyncs->Increment();
      }
    }
    if (status.ok() && !resync && at.step >= length.total_steps) {
      absl::StatusOr<RunPhase> phase = Finish(length);
      if (!phase.ok()) {
        status = phase.status();
        break;
      }
      // The chief may stop answering once it has told every task.
      if (*phase == PHASE_FINISHED) break;
      if (*phase == PHASE_FAILED) {
        status = RunFailed(at.step);
        break;
      }
    }
    // Asked after a peer failure, or once this worker is done: the run ends
    // when the chief says so, and a chief started again meanwhile may go
    // back to a checkpoint before the end, which this worker trains from.
    resync = false;
    absl::StatusOr<Position> next =
        Resync(at, length, /*done=*/at.step >= length.total_steps);
    if (!next.ok()) {
      status = next.status();
      break;
    }
    status = absl::OkStatus();
    if (next->over) break;
    if (next->generation != at.generation) {
      LogInfo(absl::StrCat("worker ", options_.worker_index,
                           ": the run was restored; going on from step ",
                           next->step, " (generation ", next->generation, ")"));
    }
    // A collective run's variables are this worker's: restored here, from
    // the checkpoint the chief went back to.
    const bool restored = next->generation != at.generation;
    at = *next;
    SetGeneration(at.generation);
    if (restored && options_.restore != nullptr &&
        at.step < length.total_steps) {
      status = Restore(at, &resync);
    }
  }
  done.Notify();
  liveness.join();
  return status;
}

absl::StatusOr<RunPhase> Trainer::Finish(const data::RunLength& length) {
  if (options_.save_checkpoint != nullptr) {
    PSTRAIN_RETURN_IF_ERROR(
        AtStep(length.total_steps, "writing the final checkpoint",
               options_.save_checkpoint(length.total_steps)));
  }
  RetryOptions retry;
  retry.retry_for = options_.chief_patience;
  RunPhase phase = PHASE_TRAINING;
  absl::Status finished = Retry(retry, [&]() -> absl::Status {
    PSTRAIN_ASSIGN_OR_RETURN(TrainingFinishedResponse reply,
                             chief_->TrainingFinished(length.total_steps));
    phase = reply.phase();
    return absl::OkStatus();
  });
  if (!finished.ok()) return AtStep(length.total_steps, "finishing", finished);
  return phase;
}

absl::Status Trainer::TrainFrom(const data::ShardPlan& plan,
                                const data::RunLength& length, Buffers& buffers,
                                int64_t* step) {
  const int64_t start = *step;
  // The data order is per epoch, from the seed: a run going on from `start`
  // begins in its epoch and skips the batches already trained on.
  data::PrefetchOptions prefetch;
  prefetch.first_epoch = start / length.steps_per_epoch;
  prefetch.num_epochs = (length.total_steps + length.steps_per_epoch - 1) /
                            length.steps_per_epoch -
                        prefetch.first_epoch;
  std::unique_ptr<data::BatchSource> batches;
  if (options_.open_stream != nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(
        batches, options_.open_stream(start, length, options_.worker_index));
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(batches,
                             data::Prefetcher::Create(train_, plan, prefetch));
  }
  for (int64_t skip =
           options_.open_stream != nullptr ? 0 : start % length.steps_per_epoch;
       skip > 0; --skip) {
    absl::StatusOr<data::Batch*> batch = batches->Next();
    if (!batch.ok()) return AtStep(start, "skipping data", batch.status());
    batches->Release(*batch);
  }

  const bool sync = config_->update().mode() == UpdateConfig::SYNC;
  // Never a pulled version: those stay far below 2^63.
  constexpr uint64_t kSparseVersionBit = uint64_t{1} << 63;
  int64_t stale_pushes = 0;
  int64_t window_steps = 0, window_examples = 0, window_correct = 0;
  double window_loss = 0;
  // Binary cross-entropy: the window's scores and labels, for a running
  // training AUC in the report (NaN scores, left by a backend that does not
  // give them, make it undefined and it is not reported).
  const bool binary_auc =
      config_->loss().kind() == LossConfig::BINARY_CROSSENTROPY;
  std::vector<float> window_scores;
  std::vector<int32_t> window_labels;
  absl::Time window_start = absl::Now();
  WorkerMetrics* const metrics = options_.metrics;
  // With metrics: the step's parts are timed from `mark` on.
  absl::Time step_start, mark;
  auto lap = [&mark](Histogram* part) {
    const absl::Time now = absl::Now();
    part->Observe(absl::ToDoubleSeconds(now - mark));
    mark = now;
  };
  for (; *step < length.total_steps; ++*step) {
    if (metrics != nullptr) step_start = mark = absl::Now();
    absl::StatusOr<data::Batch*> batch = batches->Next();
    if (!batch.ok()) return AtStep(*step, "reading the data", batch.status());
    if (metrics != nullptr) lap(metrics->data_seconds);
    // The batch's embedding rows are pulled beside the dense variables: on
    // a second thread its ids are remapped and their rows asked for while
    // this one waits for the dense pull (in sync mode, for the step before
    // to complete).
    std::optional<Beside> rows;
    if (!sparse_->empty()) {
      rows.emplace(beside_, [&] { return PullSparse(*step, *batch, buffers); });
    }
    absl::StatusOr<int64_t> version =
        ps_->PullDense(sync ? *step : 0, buffers.pull);
    const absl::Status rows_pulled = rows ? rows->Wait() : absl::OkStatus();
    if (!version.ok()) {
      batches->Release(*batch);
      return AtStep(*step, "pulling", version.status());
    }
    if (!rows_pulled.ok()) {
      batches->Release(*batch);
      return rows_pulled;
    }
    // Asked after the pull: in sync mode the step before is complete, so a
    // membership change made before it is seen here.
    if (absl::Status may_start = WaitUntilMayStart(*step); !may_start.ok()) {
      batches->Release(*batch);
      return may_start;
    }
    if (absl::Status covered = GatherCoveredBatches(*step, length, buffers);
        !covered.ok()) {
      batches->Release(*batch);
      return covered;
    }
    // Covered batches' ids join the step's, and every row is pulled again.
    if (!buffers.covered.empty() && !sparse_->empty()) {
      if (absl::Status pulled = PullSparse(*step, nullptr, buffers);
          !pulled.ok()) {
        batches->Release(*batch);
        return pulled;
      }
    }
    // The heartbeat (and a hold at a checkpoint) counts as pulling.
    if (metrics != nullptr) lap(metrics->pull_seconds);
    StepInput input;
    input.features = (*batch)->features.raw_data();
    input.labels = (*batch)->labels.data<int32_t>();
    input.batch = (*batch)->size();
    input.step = *step;
    // Its block's place in the step's global batch (data/shard_plan.h),
    // also at a last step with a short batch.
    input.example_offset = (options_.data_shard >= 0 ? options_.data_shard
                                                     : options_.worker_index) *
                           int64_t{config_->batch_size_per_worker()};
    if (binary_auc) {
      window_scores.resize(window_scores.size() + input.batch, NAN);
      input.scores = window_scores.data() + window_scores.size() - input.batch;
      window_labels.insert(window_labels.end(), input.labels,
                           input.labels + input.batch);
    }
    // The version keys a backend's caches of the weights; the mirrors of
    // embedding tables change every step (other rows), so then every step
    // gets a version of its own.
    input.weights_version =
        sparse_->empty() ? *version : kSparseVersionBit | ++mirror_versions_;
    if (options_.gradient_ready != nullptr) {
      input.gradient_ready = [this, s = *step](const std::string& variable,
                                               absl::Span<float> gradient) {
        options_.gradient_ready(s, variable, gradient);
      };
    }
    absl::StatusOr<StepResult> result =
        backend_->TrainStep(input, buffers.weights, &buffers.gradients);
    batches->Release(*batch);
    if (!result.ok()) return AtStep(*step, "computing", result.status());
    const int64_t own_examples = result->examples;
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t covered_examples,
                             TrainCoveredBatches(*step, buffers, &*result));
    const int64_t examples = own_examples + covered_examples;
    if (metrics != nullptr) lap(metrics->compute_seconds);
    absl::SleepFor(options_.push_delay);
    // The tables' rows are pushed beside the dense variables, on the second
    // thread: the next step's pulls wait for this one on every piece (sync),
    // and a push a ps took already is not applied again when the step is
    // redone after the other failed (async ps tasks apply this worker's
    // push of a step once, however often it is redone: RequestHeader.step;
    // sync ones count a worker once per step). The global batches it sums:
    std::vector<int64_t> batches = {*step * options_.num_workers +
                                    options_.worker_index};
    for (const CoveredBatch& covered : buffers.covered) {
      if (IsOwed(covered.ref.step, *step)) continue;
      batches.push_back(covered.ref.step * options_.num_workers +
                        covered.ref.worker);
    }
    ps_->set_step(*step, batches);
    std::optional<Beside> row_push;
    if (!sparse_->empty()) {
      row_push.emplace(beside_, [&] {
        return sparse_->Push(*step, examples, buffers.gradients);
      });
    }
    const absl::Status dense =
        ps_->PushDense(sync ? *step : *version, examples, buffers.push);
    absl::Status pushed = row_push ? row_push->Wait() : absl::OkStatus();
    if (!dense.ok() && (pushed.ok() || !ps::IsStaleGradient(dense))) {
      pushed = dense;
    }
    if (!sync && ps::IsStaleGradient(pushed)) {
      // Other workers moved the variables too far meanwhile: this step's
      // gradient is dropped (the ps refused it whole) and the next step
      // pulls fresh values.
      ++stale_pushes;
      if (metrics != nullptr) metrics->stale_pushes->Increment();
    } else if (!pushed.ok()) {
      return AtStep(*step, "pushing", pushed);
    }
    if (metrics != nullptr) {
      lap(metrics->push_seconds);
      metrics->step_seconds->Observe(absl::ToDoubleSeconds(mark - step_start));
      metrics->steps->Increment();
      metrics->examples->Increment(result->examples);
      metrics->step->Set(*step + 1);
    }

    ++window_steps;
    window_examples += result->examples;
    window_correct += result->correct;
    window_loss += result->loss_sum + result->examples * result->l2_loss;
    const bool last = *step + 1 == length.total_steps;
    // A window ends at an epoch's end too: the chief counts each report in
    // the epoch of its step (chief/run_state.h, TakeEpochProgress).
    const bool epoch_end =
        length.steps_per_epoch > 0 && (*step + 1) % length.steps_per_epoch == 0;
    if (window_steps == options_.report_every_steps || last || epoch_end) {
      const double seconds =
          std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - window_start));
      ReportMetricsRequest metrics;
      metrics.set_step(*step + 1);
      metrics.set_loss(window_loss / std::max<int64_t>(1, window_examples));
      metrics.set_accuracy(static_cast<double>(window_correct) /
                           std::max<int64_t>(1, window_examples));
      metrics.set_examples_per_sec(window_examples / seconds);
      metrics.set_num_steps(window_steps);
      if (binary_auc) {
        const double auc = chief::ExactAuc(window_scores, window_labels);
        if (std::isfinite(auc)) metrics.set_auc(auc);
        window_scores.clear();
        window_labels.clear();
      }
      absl::StatusOr<ReportMetricsResponse> reply =
          chief_->ReportMetrics(metrics);
      if (!reply.ok()) {
        return AtStep(*step, "reporting", ChiefFailure(reply.status()));
      }
      if (reply->phase() == PHASE_FAILED) return RunFailed(*step);
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
  return absl::OkStatus();
}

absl::Status Trainer::PullSparse(int64_t step, data::Batch* batch,
                                 Buffers& buffers) {
  absl::Status touched;
  if (batch != nullptr) {
    sparse_->Clear();
    touched = sparse_->TouchAndRemap(
        &batch->features, batch->indices,
        batch->wide_ids.num_elements() > 0 ? &batch->wide_ids : nullptr);
  } else {
    for (CoveredBatch& covered : buffers.covered) {
      if (!touched.ok()) break;
      touched = sparse_->TouchAndRemap(
          &covered.features, covered.indices,
          covered.wide_ids.num_elements() > 0 ? &covered.wide_ids : nullptr);
    }
  }
  if (!touched.ok()) return AtStep(step, "reading the data", touched);
  const bool sync = config_->update().mode() == UpdateConfig::SYNC;
  absl::Status pulled = sparse_->Pull(sync ? step : 0, buffers.mirrors);
  if (!pulled.ok()) return AtStep(step, "pulling embedding rows", pulled);
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace pstrain

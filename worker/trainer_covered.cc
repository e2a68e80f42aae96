// Trainer's side of --on_worker_failure=continue (trainer.h): the batches
// of absent workers this worker trains, as they would have, gathered from
// the in-memory data or read from their streams, trained, and pushed with
// its own gradients (or on their own, as owed).

#include <cmath>
#include <thread>
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
#include "worker/trainer.h"
#include "worker/trainer_buffers.h"

namespace pstrain {
namespace worker {

absl::Status Trainer::GatherCoveredBatches(int64_t step,
                                           const data::RunLength& length,
                                           Buffers& buffers) {
  const std::vector<chief::BatchRef> covered = chief::CoveredBatches(
      membership_, options_.worker_index, step, options_.num_workers);
  buffers.covered.resize(covered.size());
  if (covered.empty()) return absl::OkStatus();
  if (options_.open_stream != nullptr) {
    PSTRAIN_RETURN_IF_ERROR(EnsureCoveredGradients(buffers));
    return ReadCoveredBatches(covered, length, buffers);
  }
  PSTRAIN_RETURN_IF_ERROR(EnsureCoveredGradients(buffers));
  const int64_t batch = config_->batch_size_per_worker();
  const int64_t per_example = train_->features.row_elements();
  for (size_t c = 0; c < covered.size(); ++c) {
    const chief::BatchRef& ref = covered[c];
    CoveredBatch& out = buffers.covered[c];
    out.ref = ref;
    if (out.features.num_elements() != batch * per_example) {
      PSTRAIN_ASSIGN_OR_RETURN(
          out.features,
          Tensor::Create(data::FeedDtype(*train_), {batch, per_example}));
    }
    auto plan = plans_.find(ref.worker);
    if (plan == plans_.end()) {
      PSTRAIN_ASSIGN_OR_RETURN(
          data::ShardPlan created,
          data::ShardPlan::Create(
              train_->size(), data::RunShardOptions(
                                  *config_, options_.num_workers, ref.worker)));
      plan = plans_.emplace(ref.worker, std::move(created)).first;
    }
    // The absent worker's batch of that step, exactly as it would have
    // trained it: its examples, its dropout masks.
    const std::vector<int64_t> order =
        plan->second.WorkerOrder(ref.step / length.steps_per_epoch);
    const int64_t begin = (ref.step % length.steps_per_epoch) * batch;
    out.indices.assign(order.begin() + begin, order.begin() + begin + batch);
    data::GatherExamples(*train_, out.indices, out.features.raw_data());
    out.labels.resize(batch);
    for (int64_t i = 0; i < batch; ++i) {
      out.labels[i] = train_->labels[out.indices[i]];
    }
  }
  return absl::OkStatus();
}

absl::Status Trainer::EnsureCoveredGradients(Buffers& buffers) {
  if (!buffers.covered_gradients.empty()) return absl::OkStatus();
  const ModelSpec local = WithLocalTables(
      *spec_, int64_t{config_->batch_size_per_worker()} * options_.num_workers);
  buffers.covered_storage.reserve(local.variables.size());
  for (const VariableDef& def : local.variables) {
    PSTRAIN_ASSIGN_OR_RETURN(
        Tensor g, Tensor::Create(DT_FLOAT, ps::HeldShape(def, options_.parts)));
    buffers.covered_storage.push_back(std::move(g));
    buffers.covered_gradients[def.name()] = &buffers.covered_storage.back();
  }
  return absl::OkStatus();
}

absl::Status Trainer::ReadCoveredBatches(
    const std::vector<chief::BatchRef>& covered, const data::RunLength& length,
    Buffers& buffers) {
  for (size_t c = 0; c < covered.size(); ++c) {
    const chief::BatchRef& ref = covered[c];
    CoveredBatch& out = buffers.covered[c];
    out.ref = ref;
    // The absent worker's stream, opened where its batch of ref.step is
    // (after a membership change or an owed batch of an earlier step):
    // the batch is the one it would have trained, its lines exactly.
    CoveredStream& stream = buffers.covered_streams[ref.worker];
    if (stream.source == nullptr || stream.next_step != ref.step) {
      stream.source.reset();
      absl::StatusOr<std::unique_ptr<data::BatchSource>> opened =
          options_.open_stream(ref.step, length, ref.worker);
      if (!opened.ok()) {
        return AtStep(ref.step,
                      absl::StrCat("opening worker ", ref.worker, "'s data"),
                      opened.status());
      }
      stream.source = *std::move(opened);
      stream.next_step = ref.step;
    }
    absl::StatusOr<data::Batch*> batch = stream.source->Next();
    if (!batch.ok()) {
      return AtStep(ref.step,
                    absl::StrCat("reading worker ", ref.worker, "'s data"),
                    batch.status());
    }
    const data::Batch& in = **batch;
    out.indices = in.indices;
    out.features = in.features.Clone();
    out.wide_ids = in.wide_ids.Clone();
    const int32_t* labels = in.labels.data<int32_t>();
    out.labels.assign(labels, labels + in.size());
    stream.source->Release(*batch);
    ++stream.next_step;
  }
  return absl::OkStatus();
}

bool Trainer::IsOwed(int64_t batch_step, int64_t step) const {
  return config_->update().mode() == UpdateConfig::SYNC && batch_step < step;
}

absl::StatusOr<int64_t> Trainer::TrainCoveredBatches(int64_t step,
                                                     Buffers& buffers,
                                                     StepResult* result) {
  int64_t merged_examples = 0;
  for (const CoveredBatch& covered : buffers.covered) {
    const chief::BatchRef& ref = covered.ref;
    const std::string which =
        absl::StrCat("worker ", ref.worker, "'s batch of step ", ref.step);
    StepInput input;
    input.features = covered.features.raw_data();
    input.labels = covered.labels.data();
    input.batch = static_cast<int64_t>(covered.indices.size());
    input.step = ref.step;
    input.example_offset =
        ref.worker * int64_t{config_->batch_size_per_worker()};
    absl::StatusOr<StepResult> extra =
        backend_->TrainStep(input, buffers.weights, &buffers.covered_gradients);
    if (!extra.ok()) {
      return AtStep(step, absl::StrCat("computing ", which), extra.status());
    }
    result->examples += extra->examples;
    result->correct += extra->correct;
    result->loss_sum += extra->loss_sum;
    if (IsOwed(ref.step, step)) {
      if (buffers.covered_push.empty()) {
        for (const auto& [name, g] : buffers.push) {
          buffers.covered_push[name] = buffers.covered_gradients.at(name);
        }
      }
      ps_->set_step(step, {ref.step * options_.num_workers + ref.worker},
                    /*owed=*/true);
      absl::Status pushed =
          sparse_->Push(step, extra->examples, buffers.covered_gradients);
      if (pushed.ok()) {
        pushed = ps_->PushDense(step, extra->examples, buffers.covered_push);
      }
      if (!pushed.ok()) {
        return AtStep(step, absl::StrCat("pushing ", which), pushed);
      }
      continue;
    }
    for (const auto& [name, sum] : buffers.gradients) {
      float* out = sum->flat<float>().data();
      const float* add =
          buffers.covered_gradients.at(name)->flat<float>().data();
      for (int64_t i = 0; i < sum->num_elements(); ++i) out[i] += add[i];
    }
    merged_examples += extra->examples;
  }
  return merged_examples;
}

}  // namespace worker
}  // namespace pstrain

#include "collective/local_replica.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace pstrain {
namespace worker {

absl::StatusOr<std::unique_ptr<LocalReplica>> LocalReplica::Create(
    LocalReplicaOptions options) {
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a collective run needs at least one worker, not ",
                     options.num_workers));
  }
  if (options.num_workers > 1 && options.ring == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.num_workers, " workers need a ring to all-reduce in"));
  }
  std::unique_ptr<LocalReplica> replica(new LocalReplica());
  replica->ring_ = options.ring;
  replica->num_workers_ = options.num_workers;
  PSTRAIN_ASSIGN_OR_RETURN(replica->optimizer_,
                           ps::CreateOptimizer(options.optimizer));
  for (const VariableDef& def : options.variables) {
    if (def.sparse()) {
      return absl::UnimplementedError(absl::StrCat(
          "variable '", def.name(),
          "' is an embedding table, which a collective run (no ps) does not "
          "hold; add a \"ps\" job to TF_CONFIG to train this model"));
    }
    const ps::Optimizer* optimizer = replica->optimizer_.get();
    if (def.has_moving_average()) {
      absl::StatusOr<std::unique_ptr<ps::Optimizer>> average =
          ps::CreateMovingAverage(def.moving_average().momentum());
      if (!average.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable '", def.name(), "': ", average.status().message()));
      }
      optimizer = average->get();
      replica->moving_averages_.push_back(*std::move(average));
    }
    const int64_t rows = def.shape().dims_size() > 0 ? def.shape().dims(0) : 1;
    PSTRAIN_ASSIGN_OR_RETURN(
        std::unique_ptr<ps::DenseVariable> variable,
        ps::DenseVariable::Create(def, 0, rows, optimizer));
    replica->optimizers_[def.name()] = optimizer;
    replica->index_of_[def.name()] =
        static_cast<int>(replica->bytes_of_.size());
    replica->bytes_of_.push_back(variable->num_bytes());
    if (!replica->variables_.emplace(def.name(), std::move(variable)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable '", def.name(), "' defined twice"));
    }
  }
  if (options.bucket_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bucket_bytes: ", options.bucket_bytes, " must be positive"));
  }
  // Buckets in reverse model order (the backward's), each closed once it
  // holds bucket_bytes; past kMaxBucketsPerStep, the rest go in the last.
  const int n = static_cast<int>(replica->bytes_of_.size());
  replica->bucket_of_.assign(n, 0);
  int64_t bytes = 0;
  for (int i = n - 1; i >= 0; --i) {
    auto& buckets = replica->buckets_;
    if (buckets.empty() ||
        (bytes >= options.bucket_bytes &&
         static_cast<int>(buckets.size()) < kMaxBucketsPerStep)) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(i);
    replica->bucket_of_[i] = static_cast<int>(buckets.size()) - 1;
    bytes += replica->bytes_of_[i];
  }
  {
    absl::MutexLock lock(&replica->mu_);
    replica->ready_.assign(n, absl::Span<float>());
  }
  if (replica->ring_ != nullptr && replica->num_workers_ > 1) {
    LocalReplica* const r = replica.get();
    replica->reducer_ = std::thread([r] { r->ReduceLoop(); });
  }
  return replica;
}

LocalReplica::~LocalReplica() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (reducer_.joinable()) reducer_.join();
}

void LocalReplica::BeginStep(int64_t step) {
  // (Without a reducer nothing runs.)
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !reducer_.joinable() || reduced_ == queued_;
  };
  mu_.Await(absl::Condition(&idle));
  step_under_way_ = step;
  step_generation_ = generation_;
  std::fill(ready_.begin(), ready_.end(), absl::Span<float>());
  missing_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    missing_[b] = static_cast<int>(buckets_[b].size());
  }
  queued_ = reduced_ = 0;
  step_error_ = absl::OkStatus();
}

void LocalReplica::MarkReady(int index, absl::Span<float> gradient) {
  if (ready_[index].data() != nullptr) return;  // reported before
  ready_[index] = gradient;
  --missing_[bucket_of_[index]];
  // Buckets go out in order: this one and the complete ones after it,
  // once every one before it went.
  while (queued_ < static_cast<int>(buckets_.size()) &&
         missing_[queued_] == 0) {
    ++queued_;
  }
}

void LocalReplica::GradientReady(int64_t step, const std::string& name,
                                 absl::Span<float> gradient) {
  absl::MutexLock lock(&mu_);
  if (step != step_under_way_ || generation_ != step_generation_) {
    BeginStep(step);
  }
  auto it = index_of_.find(name);
  if (it == index_of_.end() ||
      static_cast<int64_t>(gradient.size() * sizeof(float)) !=
          bytes_of_[it->second]) {
    if (step_error_.ok()) {
      step_error_ = absl::InvalidArgumentError(absl::StrCat(
          "step ", step, ": gradient of '", name, "' (", gradient.size(),
          " floats) reported ready, which this replica ",
          it == index_of_.end() ? "does not hold" : "holds in another size"));
    }
    return;
  }
  MarkReady(it->second, gradient);
}

void LocalReplica::ReduceLoop() {
  std::vector<absl::Span<float>> spans;
  for (;;) {
    uint64_t id = 0;
    bool skip = false;
    {
      absl::MutexLock lock(&mu_);
      auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || reduced_ < queued_;
      };
      mu_.Await(absl::Condition(&work));
      if (stop_) return;
      const int bucket = reduced_;
      // Ids strictly increase within a generation (steps, then buckets)
      // and across them (a restore starts a new generation, at an earlier
      // step maybe).
      id = (static_cast<uint64_t>(step_generation_) << 32) +
           static_cast<uint64_t>(step_under_way_ + 1) * kMaxBucketsPerStep +
           bucket;
      spans.clear();
      for (int v : buckets_[bucket]) spans.push_back(ready_[v]);
      // After a failure the step is lost: its other buckets are skipped.
      skip = !step_error_.ok();
    }
    absl::Status status =
        skip ? absl::OkStatus()
             : ring_->AllReduce(id, absl::MakeConstSpan(spans));
    absl::MutexLock lock(&mu_);
    if (!status.ok() && step_error_.ok()) step_error_ = status;
    ++reduced_;
  }
}

absl::Status LocalReplica::Reinitialize() {
  for (auto& [name, variable] : variables_) {
    const VariableDef& def = variable->def();
    PSTRAIN_ASSIGN_OR_RETURN(
        std::unique_ptr<ps::DenseVariable> fresh,
        ps::DenseVariable::Create(def, 0, variable->row_end(),
                                  optimizers_.at(name)));
    variable = std::move(fresh);
  }
  return absl::OkStatus();
}

int64_t LocalReplica::version() const {
  int64_t version = 0;
  bool first = true;
  for (const auto& [name, v] : variables_) {
    version = first ? v->version() : std::min(version, v->version());
    first = false;
  }
  return version;
}

absl::Status LocalReplica::PushDense(
    int64_t version, int64_t batch_size,
    const std::map<std::string, Tensor*>& gradients) {
  for (const auto& [name, gradient] : gradients) {
    auto it = variables_.find(name);
    if (it == variables_.end()) {
      return absl::FailedPreconditionError(absl::StrCat("pushing variable '",
                                                        name,
                                                        "', which this replica "
                                                        "does not hold"));
    }
    if (static_cast<int64_t>(gradient->num_bytes()) !=
        it->second->num_bytes()) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient of '", name, "' has ", gradient->num_bytes(),
                       " bytes, the variable ", it->second->num_bytes()));
    }
  }
  if (gradients.size() != variables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pushing ", gradients.size(), " gradients; the replica ",
                     "holds ", variables_.size(), " variables"));
  }
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (step_ != step_under_way_ || generation_ != step_generation_) {
      BeginStep(step_);
    }
    for (const auto& [name, gradient] : gradients) {
      const int index = index_of_.at(name);
      const absl::Span<float> given = gradient->flat<float>();
      if (ready_[index].data() != nullptr &&
          ready_[index].data() != given.data() && step_error_.ok()) {
        step_error_ = absl::InvalidArgumentError(absl::StrCat(
            "step ", step_, ": the gradient of '", name,
            "' was reported ready in another buffer than the one pushed"));
      }
      MarkReady(index, given);
    }
    if (reducer_.joinable()) {
      auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return reduced_ == static_cast<int>(buckets_.size());
      };
      mu_.Await(absl::Condition(&done));
    } else {
      reduced_ = queued_;  // one worker: nothing to all-reduce
    }
    status = step_error_;
    // A step pushed again (after a failure) starts over.
    step_under_way_ = -1;
  }
  PSTRAIN_RETURN_IF_ERROR(status);
  const int64_t global_batch = batch_size * num_workers_;
  for (const auto& [name, gradient] : gradients) {
    ps::Chunk chunk;
    chunk.data = absl::string_view(
        static_cast<const char*>(gradient->raw_data()), gradient->num_bytes());
    variables_.at(name)->ApplyAsync(global_batch,
                                    absl::MakeConstSpan(&chunk, 1));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> LocalReplica::PullDense(
    int64_t min_version, const std::map<std::string, Tensor*>& values) {
  int64_t lowest = -1;
  for (const auto& [name, value] : values) {
    auto it = variables_.find(name);
    if (it == variables_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pulling variable '", name, "', which this replica does not hold"));
    }
    const ps::DenseVariable& variable = *it->second;
    if (static_cast<int64_t>(value->num_bytes()) != variable.num_bytes()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pulling '", name, "' into ", value->num_bytes(),
                       " bytes; the variable has ", variable.num_bytes()));
    }
    if (variable.version() < min_version) {
      return absl::FailedPreconditionError(
          absl::StrCat("variable '", name, "' is at version ",
                       variable.version(), ", below ", min_version));
    }
    char* out = static_cast<char*>(value->raw_data());
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t version,
                             variable.Read(min_version, absl::Now(), 1,
                                           [out](const ps::ValueView& view) {
                                             std::memcpy(out, view.data,
                                                         view.size);
                                           }));
    lowest = lowest < 0 ? version : std::min(lowest, version);
  }
  return std::max<int64_t>(lowest, 0);
}

}  // namespace worker
}  // namespace pstrain

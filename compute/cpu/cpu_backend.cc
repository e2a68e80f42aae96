#include "compute/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "compute/cpu/bf16_support.h"
#include "compute/cpu/engine.h"
#include "compute/cpu/l2.h"
#include "compute/cpu/layer_graph.h"
#include "compute/cpu/losses.h"
#include "compute/layer_plan.h"
#include "compute/loss_config.h"
#include "compute/rng_tracker.h"
#include "data/model_input.h"

namespace pstrain {
namespace worker {
namespace {

using cpu::Engine;
using cpu::LayerGraph;

// Batch sizes whose graphs are kept: the regular one, an epoch's last, and
// an evaluation size or two.
constexpr size_t kMaxCachedGraphs = 4;

// A regularized variable (a kernel or bias): its index, size, regularizer.
struct Regularized {
  int variable = 0;
  int64_t size = 0;  // Its elements.
  Regularizer regularizer;
};

class CpuBackend : public Backend {
 public:
  // `spec` has its final activation left out where the loss reads the
  // logits behind it (CreateCpuBackend); `output_is_logits` says how the
  // cross-entropies read its output.
  CpuBackend(const ModelSpec& spec, const CpuBackendOptions& options,
             bool output_is_logits, std::unique_ptr<Engine> engine)
      : spec_(spec),
        options_(options),
        output_is_logits_(output_is_logits),
        rng_(options.run_seed, options.replica),
        engine_(std::move(engine)) {}

  absl::Status Init();

  absl::StatusOr<StepResult> TrainStep(const StepInput& input,
                                       const Weights& weights,
                                       Gradients* gradients) override;

  absl::StatusOr<StepResult> Evaluate(const StepInput& input,
                                      const Weights& weights) override;

 private:
  struct CachedGraph {
    std::unique_ptr<LayerGraph> graph;
    uint64_t last_use = 0;
  };

  // Fills weight_ptrs_ from `weights`, checking every variable is there in
  // its shape.
  absl::Status ResolveWeights(const Weights& weights);
  absl::Status ResolveGradients(Gradients* gradients);
  absl::StatusOr<LayerGraph*> GraphFor(int64_t batch);
  // Forward, and the loss on the output; with `train` also its gradient in
  // the graph's output_gradient().
  absl::StatusOr<StepResult> ForwardAndLoss(const StepInput& input,
                                            LayerGraph* graph, bool train);
  // The model inputs' buffers for `input`'s rows: a model of one input
  // reads the rows as they are; one of several inputs gets its columns
  // (model_input.h), as int32 for ids.
  std::vector<const void*> SplitInputs(const StepInput& input);
  // The regularizers' penalty (cpu/l2.h) over the regularized variables;
  // adds gradient_batch times its gradient to theirs (none for 0), but for
  // those reported_ (theirs is in already).
  double L2Penalty(int64_t gradient_batch);
  // Adds gradient_batch times `r`'s regularizer gradient to its gradient.
  void AddRegularizerGradient(const Regularized& r, int64_t gradient_batch);

  const ModelSpec spec_;
  const CpuBackendOptions options_;
  const bool output_is_logits_;
  const RngTracker rng_;
  std::unique_ptr<Engine> engine_;
  int64_t outputs_ = 0;  // Floats per example of the model's output.
  std::vector<int64_t> variable_sizes_;  // Elements of each variable.
  std::vector<Regularized> regularized_;
  // Per variable: whether this TrainStep reported its gradient final
  // (StepInput::gradient_ready).
  std::vector<bool> reported_;

  std::vector<std::pair<int64_t, CachedGraph>> graphs_;
  uint64_t use_counter_ = 0;
  std::vector<const float*> weight_ptrs_;
  std::vector<float*> gradient_ptrs_;
  std::unique_ptr<cpu::LabelLoss> loss_;
  std::vector<InputColumns> columns_;
  DataType feed_ = DT_FLOAT;               // The rows' dtype.
  std::vector<std::vector<float>> split_;  // Per input (int32 bits for ids).
};

absl::Status CpuBackend::Init() {
  columns_ = ModelInputColumns(spec_);
  feed_ = ModelFeedDtype(spec_);
  // What the planner refuses, refused now rather than at the first batch.
  PSTRAIN_RETURN_IF_ERROR(PlanLayers(spec_, LayerPlanOptions(), rng_).status());
  if (spec_.output_shape.size() != 1 || spec_.output_shape[0] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CpuBackend: the model's output ", ShapeString(spec_.output_shape),
        " must be one vector per example (end the model with a Dense layer)"));
  }
  outputs_ = spec_.output_shape[0];
  loss_ = std::make_unique<cpu::LabelLoss>(options_.loss, output_is_logits_,
                                           outputs_);
  for (const VariableDef& def : spec_.variables) {
    int64_t size = 1;
    for (int64_t d : def.shape().dims()) size *= d;
    variable_sizes_.push_back(size);
  }
  reported_.assign(spec_.variables.size(), false);
  for (const RegularizedVariable& r : RegularizedVariables(spec_)) {
    regularized_.push_back(
        {r.variable, variable_sizes_[r.variable], r.regularizer});
  }
  weight_ptrs_.resize(spec_.variables.size());
  gradient_ptrs_.resize(spec_.variables.size());
  return absl::OkStatus();
}

absl::Status CpuBackend::ResolveWeights(const Weights& weights) {
  for (size_t i = 0; i < spec_.variables.size(); ++i) {
    const VariableDef& def = spec_.variables[i];
    auto it = weights.find(def.name());
    const Tensor* tensor = it == weights.end() ? nullptr : it->second;
    PSTRAIN_RETURN_IF_ERROR(
        CheckVariableTensor("CpuBackend", "weight", def, tensor));
    weight_ptrs_[i] = tensor->data<float>();
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::ResolveGradients(Gradients* gradients) {
  if (gradients == nullptr) {
    return absl::InvalidArgumentError("CpuBackend: gradients are required");
  }
  for (size_t i = 0; i < spec_.variables.size(); ++i) {
    const VariableDef& def = spec_.variables[i];
    auto it = gradients->find(def.name());
    Tensor* tensor = it == gradients->end() ? nullptr : it->second;
    PSTRAIN_RETURN_IF_ERROR(
        CheckVariableTensor("CpuBackend", "gradient", def, tensor));
    gradient_ptrs_[i] = tensor->data<float>();
  }
  return absl::OkStatus();
}

absl::StatusOr<LayerGraph*> CpuBackend::GraphFor(int64_t batch) {
  ++use_counter_;
  for (auto& [size, cached] : graphs_) {
    if (size == batch) {
      cached.last_use = use_counter_;
      return cached.graph.get();
    }
  }
  cpu::LayerGraphOptions options;
  options.batch = batch;
  // A final activation the loss reads behind is already out of spec_.
  options.drop_final_softmax = false;
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<LayerGraph> graph,
      LayerGraph::Create(spec_, options, rng_, engine_.get()));
  if (graphs_.size() >= kMaxCachedGraphs) {
    auto oldest = std::min_element(
        graphs_.begin(), graphs_.end(), [](const auto& a, const auto& b) {
          return a.second.last_use < b.second.last_use;
        });
    graphs_.erase(oldest);
  }
  graphs_.push_back({batch, CachedGraph{std::move(graph), use_counter_}});
  return graphs_.back().second.graph.get();
}

std::vector<const void*> CpuBackend::SplitInputs(const StepInput& input) {
  return SplitModelInputs(columns_, feed_, input.features, input.batch,
                          &split_);
}

absl::StatusOr<StepResult> CpuBackend::ForwardAndLoss(const StepInput& input,
                                                      LayerGraph* graph,
                                                      bool train) {
  DropoutStep key;
  key.step = input.step;
  key.example_offset = input.example_offset;
  PSTRAIN_RETURN_IF_ERROR(graph->Forward(SplitInputs(input), weight_ptrs_,
                                         input.weights_version,
                                         train ? &key : nullptr));
  const int64_t batch = input.batch;
  const float* output = graph->output();
  float* doutput = train ? graph->output_gradient() : nullptr;
  StepResult result;
  result.examples = batch;
  PSTRAIN_ASSIGN_OR_RETURN(
      const cpu::LabelLoss::Result loss,
      loss_->Compute(output, input.labels, batch, doutput, input.scores));
  result.loss_sum = loss.loss_sum;
  result.correct = loss.correct;
  if (input.probabilities != nullptr) {
    if (loss_->kind() != LossKind::kBinaryCrossEntropy) {
      return absl::InvalidArgumentError(
          "cpu backend: probabilities need binary_crossentropy");
    }
    for (int64_t i = 0; i < batch; ++i) {
      input.probabilities[i] =
          loss_->output_is_logits()
              ? static_cast<float>(1.0 / (1.0 + std::exp(-double{output[i]})))
              : std::clamp(output[i], 1e-7f, 1.0f - 1e-7f);
    }
  }
  return result;
}

double CpuBackend::L2Penalty(int64_t gradient_batch) {
  double penalty = 0;
  for (const Regularized& r : regularized_) {
    const bool add = gradient_batch != 0 && !reported_[r.variable];
    penalty += cpu::AddRegularization(
        weight_ptrs_[r.variable], r.size, r.regularizer,
        static_cast<double>(gradient_batch),
        add ? gradient_ptrs_[r.variable] : nullptr);
  }
  return penalty;
}

void CpuBackend::AddRegularizerGradient(const Regularized& r,
                                        int64_t gradient_batch) {
  cpu::AddRegularization(weight_ptrs_[r.variable], r.size, r.regularizer,
                         static_cast<double>(gradient_batch),
                         gradient_ptrs_[r.variable]);
}

absl::StatusOr<StepResult> CpuBackend::TrainStep(const StepInput& input,
                                                 const Weights& weights,
                                                 Gradients* gradients) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckStepInput("CpuBackend", input, options_.max_batch));
  PSTRAIN_RETURN_IF_ERROR(ResolveWeights(weights));
  PSTRAIN_RETURN_IF_ERROR(ResolveGradients(gradients));
  StepResult result;
  std::fill(reported_.begin(), reported_.end(), false);
  if (input.batch == 0) {
    // A worker with no examples this step still pushes: zeros.
    for (size_t i = 0; i < gradient_ptrs_.size(); ++i) {
      std::fill(gradient_ptrs_[i], gradient_ptrs_[i] + variable_sizes_[i],
                0.0f);
    }
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(LayerGraph * graph, GraphFor(input.batch));
    PSTRAIN_ASSIGN_OR_RETURN(result,
                             ForwardAndLoss(input, graph, /*train=*/true));
    std::function<void(int)> ready;
    if (input.gradient_ready) {
      ready = [this, &input](int v) {
        for (const Regularized& r : regularized_) {
          if (r.variable == v) AddRegularizerGradient(r, input.batch);
        }
        reported_[v] = true;
        input.gradient_ready(
            spec_.variables[v].name(),
            absl::MakeSpan(gradient_ptrs_[v], variable_sizes_[v]));
      };
    }
    PSTRAIN_RETURN_IF_ERROR(graph->Backward(weight_ptrs_, input.weights_version,
                                            gradient_ptrs_, ready));
  }
  // L2: the penalty once, its gradient batch times (backend.h).
  result.l2_loss = L2Penalty(/*gradient_batch=*/input.batch);
  return result;
}

absl::StatusOr<StepResult> CpuBackend::Evaluate(const StepInput& input,
                                                const Weights& weights) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckStepInput("CpuBackend", input, options_.max_batch));
  PSTRAIN_RETURN_IF_ERROR(ResolveWeights(weights));
  StepResult result;
  if (input.batch > 0) {
    PSTRAIN_ASSIGN_OR_RETURN(LayerGraph * graph, GraphFor(input.batch));
    PSTRAIN_ASSIGN_OR_RETURN(result,
                             ForwardAndLoss(input, graph, /*train=*/false));
  }
  result.l2_loss = L2Penalty(/*gradient_batch=*/0);
  return result;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(
    const ModelSpec& spec, const CpuBackendOptions& options) {
  if (options.num_threads < 0 || options.max_batch < 0 || options.replica < 0) {
    return absl::InvalidArgumentError(
        "CpuBackend: num_threads, max_batch and replica must be >= 0");
  }
  PSTRAIN_RETURN_IF_ERROR(cpu::CheckCpuPrecision(options.precision));
  cpu::EngineOptions engine_options;
  engine_options.num_threads = options.num_threads;
  engine_options.bf16 = options.precision == Precision::kBf16;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                           Engine::Create(engine_options));
  // Where the loss reads the logits behind a final softmax (sigmoid), the
  // backend computes the model without it.
  const LossPlan plan = PlanLoss(spec, options.loss, options.loss_input);
  ModelSpec computed = spec;
  if (plan.strip_final_activation) {
    computed.layers[computed.outputs[0]].activation = Activation::kLinear;
  }
  auto backend = std::make_unique<CpuBackend>(
      computed, options, plan.output_is_logits, std::move(engine));
  PSTRAIN_RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace worker
}  // namespace pstrain

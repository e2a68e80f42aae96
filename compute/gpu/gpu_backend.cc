#include "compute/gpu/gpu_backend.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "compute/cpu/losses.h"
#include "compute/gpu/batch_split.h"
#include "compute/gpu/device.h"
#include "compute/gpu/embedding.h"
#include "compute/gpu/graph_stage.h"
#include "compute/gpu/l2.h"
#include "compute/gpu/label_loss.h"
#include "compute/gpu/layer_graph.h"
#include "compute/gpu/nccl_all_reduce.h"
#include "compute/layer_plan.h"
#include "compute/loss_config.h"
#include "compute/rng_tracker.h"
#include "data/model_input.h"

namespace pstrain {
namespace worker {
namespace {

using gpu::BatchSlice;
using gpu::Device;
using gpu::DeviceBuffer;
using gpu::LayerGraph;

// Batch sizes whose graphs are kept per GPU, as on the CPU.
constexpr size_t kMaxCachedGraphs = 4;
// Variables start at multiples of this many floats in the weight and
// gradient buffers (256 bytes: what cuBLAS and cuDNN like best).
constexpr int64_t kAlignFloats = 64;

// A regularized variable (a kernel or bias): its index and regularizer.
struct Regularized {
  int variable = 0;
  Regularizer regularizer;
};

// One GPU's copy of the model and its buffers.
struct Replica {
  std::unique_ptr<Device> device;
  DeviceBuffer weights;    // Every variable, at variable_offsets_.
  DeviceBuffer gradients;  // Likewise.
  std::vector<const float*> weight_ptrs;
  std::vector<float*> gradient_ptrs;
  std::vector<DeviceBuffer> inputs;  // The slice's model inputs, grown.
  DeviceBuffer labels;
  std::unique_ptr<gpu::LabelLoss> loss;
  std::vector<std::pair<int64_t, std::unique_ptr<LayerGraph>>> graphs;
  std::vector<uint64_t> graph_last_use;
};

class GpuBackend : public Backend {
 public:
  // `spec` has its final activation left out where the loss reads the
  // logits behind it (CreateGpuBackend); `output_is_logits` says how the
  // cross-entropies read its output.
  GpuBackend(const ModelSpec& spec, const GpuBackendOptions& options,
             bool output_is_logits)
      : spec_(spec),
        options_(options),
        output_is_logits_(output_is_logits),
        rng_(options.run_seed, options.replica) {}

  absl::Status Init();

  absl::StatusOr<StepResult> TrainStep(const StepInput& input,
                                       const Weights& weights,
                                       Gradients* gradients) override;

  absl::StatusOr<StepResult> Evaluate(const StepInput& input,
                                      const Weights& weights) override;

 private:
  // Also checks every embedding id of the batch, on the host, before any
  // GPU work (the kernels do not check them).
  absl::Status CheckInput(const StepInput& input);
  // Copies `weights` to every GPU unless they are the ones there already.
  absl::Status UploadWeights(const Weights& weights, uint64_t version);
  absl::StatusOr<LayerGraph*> GraphFor(Replica& replica, int64_t batch);
  // Copies the model inputs of `slice` to `replica`'s GPU; returns their
  // device buffers, one per model input.
  absl::StatusOr<std::vector<const void*>> UploadInputs(
      Replica& replica, const StepInput& input, const BatchSlice& slice);
  // Forward (and, with `train`, loss gradient and backward) of one GPU's
  // slice of the batch.
  absl::StatusOr<StepResult> RunSlice(Replica& replica, const StepInput& input,
                                      const BatchSlice& slice, bool train);
  // The weights uploaded, then RunSlice on every GPU's slice; their sums.
  absl::StatusOr<StepResult> RunSlices(const StepInput& input,
                                       const Weights& weights, bool train);
  // The regularizers' penalty; with gradient_batch > 0 adds gradient_batch
  // times its gradient to the first GPU's gradients.
  absl::StatusOr<double> L2Penalty(int64_t gradient_batch);
  // Grows `buffer` on `replica`'s GPU to at least `bytes`.
  absl::Status Reserve(Replica& replica, DeviceBuffer& buffer, int64_t bytes);

  const ModelSpec spec_;
  const GpuBackendOptions options_;
  const bool output_is_logits_;
  const RngTracker rng_;
  int64_t outputs_ = 0;  // Floats per example of the model's output.
  std::vector<InputColumns> columns_;      // Per model input.
  DataType feed_ = DT_FLOAT;               // The rows' dtype.
  int64_t row_elements_ = 0;               // Elements per example's row.
  std::vector<std::vector<float>> split_;  // Per input (int32 bits for ids).
  std::vector<int64_t> variable_sizes_;
  std::vector<int64_t> variable_offsets_;
  int64_t total_floats_ = 0;
  std::vector<Regularized> regularized_;

  std::vector<Replica> replicas_;
  // Declared after replicas_, so destroyed before the devices its
  // communicators' streams belong to.
  std::unique_ptr<gpu::NcclAllReducer> reducer_;
  uint64_t use_counter_ = 0;
  // What the GPUs' weight buffers hold: the version and host addresses.
  bool weights_uploaded_ = false;
  uint64_t uploaded_version_ = 0;
  std::vector<const float*> uploaded_from_;
  std::vector<float> host_outputs_;
};

absl::Status GpuBackend::Init() {
  // What the planner or the GPU's stages refuse, refused now rather than
  // at the first batch.
  PSTRAIN_ASSIGN_OR_RETURN(const LayerPlan plan,
                           PlanLayers(spec_, LayerPlanOptions(), rng_));
  for (const StagePlan& stage : plan.stages) {
    PSTRAIN_RETURN_IF_ERROR(gpu::GraphStage::Supports(stage));
  }
  if (spec_.output_shape.size() != 1 || spec_.output_shape[0] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GpuBackend: the model's output ", ShapeString(spec_.output_shape),
        " must be one vector per example (end the model with a Dense layer)"));
  }
  outputs_ = spec_.output_shape[0];
  columns_ = ModelInputColumns(spec_);
  feed_ = ModelFeedDtype(spec_);
  if (!columns_.empty()) {
    row_elements_ = columns_.back().begin + columns_.back().count;
  }
  for (const VariableDef& def : spec_.variables) {
    int64_t size = 1;
    for (int64_t d : def.shape().dims()) size *= d;
    variable_offsets_.push_back(total_floats_);
    variable_sizes_.push_back(size);
    total_floats_ += (size + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }
  for (const RegularizedVariable& r : RegularizedVariables(spec_)) {
    regularized_.push_back({r.variable, r.regularizer});
  }
  std::vector<Device*> devices;
  for (int index : options_.devices) {
    Replica replica;
    PSTRAIN_ASSIGN_OR_RETURN(replica.device, gpu::CreateDevice(index));
    const int64_t bytes = std::max<int64_t>(total_floats_, 1) * sizeof(float);
    PSTRAIN_ASSIGN_OR_RETURN(replica.weights, replica.device->Allocate(bytes));
    PSTRAIN_ASSIGN_OR_RETURN(replica.gradients,
                             replica.device->Allocate(bytes));
    for (int64_t offset : variable_offsets_) {
      replica.weight_ptrs.push_back(replica.weights.floats() + offset);
      replica.gradient_ptrs.push_back(replica.gradients.floats() + offset);
    }
    replica.inputs.resize(columns_.size());
    devices.push_back(replica.device.get());
    replicas_.push_back(std::move(replica));
  }
  if (devices.size() > 1) {
    PSTRAIN_ASSIGN_OR_RETURN(reducer_, gpu::NcclAllReducer::Create(devices));
  }
  return absl::OkStatus();
}

absl::Status GpuBackend::CheckInput(const StepInput& input) {
  PSTRAIN_RETURN_IF_ERROR(
      CheckStepInput("GpuBackend", input, options_.max_batch));
  if (input.scores != nullptr && outputs_ != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GpuBackend: per-example scores need a model with one output unit, "
        "not ",
        outputs_));
  }
  if (input.probabilities != nullptr &&
      options_.loss != LossKind::kBinaryCrossEntropy) {
    return absl::InvalidArgumentError(
        "GpuBackend: probabilities need binary_crossentropy");
  }
  if (input.batch == 0) return absl::OkStatus();
  const std::vector<const void*> host =
      SplitModelInputs(columns_, feed_, input.features, input.batch, &split_);
  for (size_t k = 0; k < columns_.size(); ++k) {
    const InputColumns& c = columns_[k];
    if (!c.ids) continue;
    gpu::EmbeddingShape ids;
    ids.ids = input.batch * c.count;
    ids.input_dim = c.vocabulary;
    ids.output_dim = 1;
    const absl::Status status =
        gpu::CheckEmbeddingIds(ids, static_cast<const int32_t*>(host[k]));
    if (!status.ok() && columns_.size() > 1) {
      return absl::Status(status.code(),
                          absl::StrCat("input ", k, ": ", status.message()));
    }
    PSTRAIN_RETURN_IF_ERROR(status);
  }
  return absl::OkStatus();
}

absl::Status GpuBackend::UploadWeights(const Weights& weights,
                                       uint64_t version) {
  std::vector<const float*> sources;
  for (const VariableDef& def : spec_.variables) {
    auto it = weights.find(def.name());
    const Tensor* tensor = it == weights.end() ? nullptr : it->second;
    PSTRAIN_RETURN_IF_ERROR(
        CheckVariableTensor("GpuBackend", "weight", def, tensor));
    sources.push_back(tensor->data<float>());
  }
  if (weights_uploaded_ && version == uploaded_version_ &&
      sources == uploaded_from_) {
    return absl::OkStatus();
  }
  weights_uploaded_ = false;
  for (Replica& replica : replicas_) {
    for (size_t i = 0; i < sources.size(); ++i) {
      PSTRAIN_RETURN_IF_ERROR(replica.device->CopyToDevice(
          sources[i], variable_sizes_[i] * sizeof(float),
          const_cast<float*>(replica.weight_ptrs[i])));
    }
  }
  weights_uploaded_ = true;
  uploaded_version_ = version;
  uploaded_from_ = std::move(sources);
  return absl::OkStatus();
}

absl::Status GpuBackend::Reserve(Replica& replica, DeviceBuffer& buffer,
                                 int64_t bytes) {
  if (static_cast<int64_t>(buffer.bytes()) >= bytes) return absl::OkStatus();
  buffer = DeviceBuffer();  // Free first: the GPU may not hold both.
  PSTRAIN_ASSIGN_OR_RETURN(buffer, replica.device->Allocate(bytes));
  return absl::OkStatus();
}

absl::StatusOr<LayerGraph*> GpuBackend::GraphFor(Replica& replica,
                                                 int64_t batch) {
  ++use_counter_;
  for (size_t i = 0; i < replica.graphs.size(); ++i) {
    if (replica.graphs[i].first == batch) {
      replica.graph_last_use[i] = use_counter_;
      return replica.graphs[i].second.get();
    }
  }
  if (replica.graphs.size() >= kMaxCachedGraphs) {
    const size_t oldest = std::min_element(replica.graph_last_use.begin(),
                                           replica.graph_last_use.end()) -
                          replica.graph_last_use.begin();
    replica.graphs.erase(replica.graphs.begin() + oldest);
    replica.graph_last_use.erase(replica.graph_last_use.begin() + oldest);
  }
  gpu::LayerGraphOptions options;
  options.batch = batch;
  // A final activation the loss reads behind is already out of spec_.
  options.drop_final_softmax = false;
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<LayerGraph> graph,
      LayerGraph::Create(spec_, options, rng_, replica.device.get()));
  replica.graphs.emplace_back(batch, std::move(graph));
  replica.graph_last_use.push_back(use_counter_);
  return replica.graphs.back().second.get();
}

absl::StatusOr<std::vector<const void*>> GpuBackend::UploadInputs(
    Replica& replica, const StepInput& input, const BatchSlice& slice) {
  const int64_t n = slice.size;
  // Every element is 4 bytes, float32 or int32 ids alike.
  const void* rows = static_cast<const char*>(input.features) +
                     slice.offset * row_elements_ * 4;
  const std::vector<const void*> host =
      SplitModelInputs(columns_, feed_, rows, n, &split_);
  std::vector<const void*> device_inputs;
  for (size_t k = 0; k < columns_.size(); ++k) {
    const InputColumns& c = columns_[k];
    const int64_t bytes = n * c.count * 4;
    PSTRAIN_RETURN_IF_ERROR(Reserve(replica, replica.inputs[k], bytes));
    PSTRAIN_RETURN_IF_ERROR(
        replica.device->CopyToDevice(host[k], bytes, replica.inputs[k].data()));
    device_inputs.push_back(replica.inputs[k].data());
  }
  return device_inputs;
}

absl::StatusOr<StepResult> GpuBackend::RunSlice(Replica& replica,
                                                const StepInput& input,
                                                const BatchSlice& slice,
                                                bool train) {
  StepResult result;
  result.examples = slice.size;
  const int64_t n = slice.size;
  if (n == 0) {
    if (train) {
      PSTRAIN_RETURN_IF_ERROR(replica.device->MakeCurrent());
      PSTRAIN_RETURN_IF_ERROR(CudaStatus(
          cudaMemsetAsync(replica.gradients.data(), 0,
                          replica.gradients.bytes(), replica.device->stream()),
          "GpuBackend: cudaMemsetAsync"));
    }
    return result;
  }
  Device& device = *replica.device;
  const int32_t* labels = input.labels + slice.offset;
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<const void*> inputs,
                           UploadInputs(replica, input, slice));
  PSTRAIN_RETURN_IF_ERROR(
      Reserve(replica, replica.labels, n * sizeof(int32_t)));
  PSTRAIN_RETURN_IF_ERROR(
      device.CopyToDevice(labels, n * sizeof(int32_t), replica.labels.data()));
  if (replica.loss == nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(
        replica.loss, gpu::LabelLoss::Create(options_.loss, output_is_logits_,
                                             outputs_, &device));
  }

  PSTRAIN_ASSIGN_OR_RETURN(LayerGraph * graph, GraphFor(replica, n));
  DropoutStep key;
  key.step = input.step;
  key.example_offset = input.example_offset + slice.offset;
  PSTRAIN_RETURN_IF_ERROR(graph->Forward(inputs, replica.weight_ptrs,
                                         input.weights_version,
                                         train ? &key : nullptr));
  const float* output = graph->output();
  float* doutput = train ? graph->output_gradient() : nullptr;
  PSTRAIN_ASSIGN_OR_RETURN(
      const gpu::LabelLoss::Result loss,
      replica.loss->Compute(output, labels, replica.labels.as<int32_t>(), n,
                            slice.offset, doutput));
  result.loss_sum = loss.loss_sum;
  result.correct = loss.correct;
  if (input.scores != nullptr || input.probabilities != nullptr) {
    // One output per example (checked in CheckInput), read back.
    host_outputs_.resize(n);
    PSTRAIN_RETURN_IF_ERROR(
        device.CopyToHost(output, n * sizeof(float), host_outputs_.data()));
    for (int64_t i = 0; i < n; ++i) {
      const float o = host_outputs_[i];
      if (input.scores != nullptr) input.scores[slice.offset + i] = o;
      if (input.probabilities != nullptr) {
        input.probabilities[slice.offset + i] =
            output_is_logits_
                ? static_cast<float>(1.0 / (1.0 + std::exp(-double{o})))
                : std::clamp(o, cpu::kKerasEpsilon, 1.0f - cpu::kKerasEpsilon);
      }
    }
  }
  if (train) {
    PSTRAIN_RETURN_IF_ERROR(graph->Backward(
        replica.weight_ptrs, input.weights_version, replica.gradient_ptrs));
  }
  return result;
}

absl::StatusOr<double> GpuBackend::L2Penalty(int64_t gradient_batch) {
  Replica& first = replicas_.front();
  double penalty = 0;
  for (const Regularized& r : regularized_) {
    const float* w = first.weight_ptrs[r.variable];
    const int64_t n = variable_sizes_[r.variable];
    // The penalty once, its gradient batch times (backend.h).
    PSTRAIN_ASSIGN_OR_RETURN(
        double term,
        gpu::AddRegularization(
            w, n, r.regularizer, static_cast<double>(gradient_batch),
            gradient_batch == 0 ? nullptr : first.gradient_ptrs[r.variable],
            first.device.get()));
    penalty += term;
  }
  return penalty;
}

absl::StatusOr<StepResult> GpuBackend::RunSlices(const StepInput& input,
                                                 const Weights& weights,
                                                 bool train) {
  PSTRAIN_RETURN_IF_ERROR(UploadWeights(weights, input.weights_version));
  PSTRAIN_ASSIGN_OR_RETURN(
      std::vector<BatchSlice> slices,
      gpu::SplitBatch(input.batch, static_cast<int>(replicas_.size())));
  StepResult result;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    PSTRAIN_ASSIGN_OR_RETURN(StepResult part,
                             RunSlice(replicas_[i], input, slices[i], train));
    result.loss_sum += part.loss_sum;
    result.correct += part.correct;
    result.examples += part.examples;
  }
  return result;
}

absl::StatusOr<StepResult> GpuBackend::TrainStep(const StepInput& input,
                                                 const Weights& weights,
                                                 Gradients* gradients) {
  PSTRAIN_RETURN_IF_ERROR(CheckInput(input));
  if (gradients == nullptr) {
    return absl::InvalidArgumentError("GpuBackend: gradients are required");
  }
  std::vector<Tensor*> outputs;
  for (const VariableDef& def : spec_.variables) {
    auto it = gradients->find(def.name());
    Tensor* tensor = it == gradients->end() ? nullptr : it->second;
    PSTRAIN_RETURN_IF_ERROR(
        CheckVariableTensor("GpuBackend", "gradient", def, tensor));
    outputs.push_back(tensor);
  }
  PSTRAIN_ASSIGN_OR_RETURN(StepResult result,
                           RunSlices(input, weights, /*train=*/true));
  // L2: the penalty once, its gradient batch times (backend.h).
  PSTRAIN_ASSIGN_OR_RETURN(result.l2_loss, L2Penalty(input.batch));
  if (reducer_ != nullptr) {
    std::vector<float*> buffers;
    for (Replica& replica : replicas_) {
      buffers.push_back(replica.gradients.floats());
    }
    PSTRAIN_RETURN_IF_ERROR(reducer_->AllReduceSum(buffers, total_floats_));
  }
  Replica& first = replicas_.front();
  for (size_t i = 0; i < outputs.size(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(first.device->CopyToHost(
        first.gradient_ptrs[i], variable_sizes_[i] * sizeof(float),
        outputs[i]->data<float>()));
  }
  return result;
}

absl::StatusOr<StepResult> GpuBackend::Evaluate(const StepInput& input,
                                                const Weights& weights) {
  PSTRAIN_RETURN_IF_ERROR(CheckInput(input));
  PSTRAIN_ASSIGN_OR_RETURN(StepResult result,
                           RunSlices(input, weights, /*train=*/false));
  PSTRAIN_ASSIGN_OR_RETURN(result.l2_loss, L2Penalty(/*gradient_batch=*/0));
  return result;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateGpuBackend(
    const ModelSpec& spec, const GpuBackendOptions& options) {
  if (options.devices.empty() || options.max_batch < 0 || options.replica < 0) {
    return absl::InvalidArgumentError(
        "GpuBackend: at least one device is required, and max_batch and "
        "replica must be >= 0");
  }
  std::set<int> seen;
  for (int index : options.devices) {
    if (!seen.insert(index).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("GpuBackend: GPU ", index, " is listed twice"));
    }
  }
  // Where the loss reads the logits behind a final softmax (sigmoid), the
  // backend computes the model without it, as the CPU's.
  const LossPlan plan = PlanLoss(spec, options.loss, options.loss_input);
  ModelSpec computed = spec;
  if (plan.strip_final_activation) {
    computed.layers[computed.outputs[0]].activation = Activation::kLinear;
  }
  auto backend =
      std::make_unique<GpuBackend>(computed, options, plan.output_is_logits);
  PSTRAIN_RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace worker
}  // namespace pstrain

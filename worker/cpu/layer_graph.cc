#include "worker/cpu/layer_graph.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cpu/activation.h"
#include "worker/cpu/attention.h"
#include "worker/cpu/batch_norm.h"
#include "worker/cpu/conv2d.h"
#include "worker/cpu/dense.h"
#include "worker/cpu/dropout.h"
#include "worker/cpu/embedding.h"
#include "worker/cpu/layer_norm.h"
#include "worker/cpu/max_pool2d.h"
#include "worker/cpu/merge.h"
#include "worker/cpu/permute.h"
#include "worker/cpu/pool2d.h"
#include "worker/cpu/relu.h"
#include "worker/cpu/softmax.h"
#include "worker/cpu/window.h"
#include "worker/cpu/zero_padding2d.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

absl::StatusOr<Tensor> Buffer(int64_t floats) {
  // Tensor buffers are 64-byte aligned and zero-filled, so their pages are
  // touched here, once, rather than in the first step.
  return Tensor::Create(DT_FLOAT, {floats});
}

// The attention layer's variables (StagePlan::attention_variables' order)
// among `values`, one buffer per variable of the model.
template <typename Pointer>
std::vector<Pointer> AttentionBuffers(const StagePlan& p,
                                      absl::Span<Pointer const> values) {
  std::vector<Pointer> out;
  for (const int index : p.attention_variables) {
    out.push_back(index >= 0 ? values[index] : nullptr);
  }
  return out;
}

AttentionWeights AttentionWeightsOf(const StagePlan& p,
                                    absl::Span<const float* const> weights) {
  const std::vector<const float*> w = AttentionBuffers(p, weights);
  AttentionWeights a;
  a.query_kernel = w[0];
  a.query_bias = w[1];
  a.key_kernel = w[2];
  a.key_bias = w[3];
  a.value_kernel = w[4];
  a.value_bias = w[5];
  a.output_kernel = w[6];
  a.output_bias = w[7];
  return a;
}

// The variables whose gradients the stage of `p` writes.
std::vector<int> StageVariables(const StagePlan& p) {
  std::vector<int> variables;
  for (const int v : {p.kernel, p.bias, p.moving_mean, p.moving_variance}) {
    if (v >= 0) variables.push_back(v);
  }
  for (const int v : p.attention_variables) {
    if (v >= 0) variables.push_back(v);
  }
  return variables;
}

}  // namespace

// One stage of the plan with its op and the buffers it owns.
struct LayerGraph::Stage {
  StagePlan plan;

  std::unique_ptr<Conv2DOp> conv;
  std::unique_ptr<MaxPool2DOp> pool;
  std::unique_ptr<DenseOp> dense;
  std::unique_ptr<ReluOp> relu;  // Also a Conv2D's fused ReLU's backward.
  std::unique_ptr<SoftmaxOp> softmax;
  std::unique_ptr<DropoutOp> dropout;
  std::unique_ptr<ActivationOp> activation;
  std::unique_ptr<BatchNormOp> batch_norm;
  std::unique_ptr<LayerNormOp> layer_norm;
  std::unique_ptr<AvgPool2DOp> avg_pool;
  std::unique_ptr<GlobalPoolOp> global_pool;
  std::unique_ptr<ZeroPadding2DOp> zero_padding;
  std::unique_ptr<PermuteOp> permute;
  std::unique_ptr<AttentionOp> attention;
  EmbeddingShape embedding;
  // BatchNormalization in training: the batch's mean and variance, which
  // Backward hands on as the moving statistics' "gradients".
  std::vector<float> batch_mean;
  std::vector<float> batch_variance;
  std::vector<int64_t> concat_widths;  // Per input, floats per row.

  Tensor y;  // [batch, out_size] unless in_place.
  // Set by Forward: what it wrote (null: it passed its input on), and what
  // the stages reading it see.
  float* out = nullptr;
  const void* value = nullptr;
};

LayerGraph::LayerGraph(int64_t batch, Engine* engine)
    : batch_(batch), engine_(engine) {}

LayerGraph::~LayerGraph() = default;

absl::StatusOr<std::unique_ptr<LayerGraph>> LayerGraph::Create(
    const ModelSpec& spec, const LayerGraphOptions& options,
    const RngTracker& rng, Engine* engine) {
  if (options.batch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LayerGraph: batch must be positive, got ", options.batch));
  }
  LayerPlanOptions plan_options;
  plan_options.drop_final_softmax = options.drop_final_softmax;
  plan_options.fuse_conv_relu = true;  // oneDNN's post-op.
  PSTRAIN_ASSIGN_OR_RETURN(LayerPlan plan, PlanLayers(spec, plan_options, rng));
  std::unique_ptr<LayerGraph> graph(new LayerGraph(options.batch, engine));
  graph->output_stage_ = plan.output;
  graph->output_size_ = plan.output_size;
  graph->inputs_.resize(plan.num_inputs);
  for (StagePlan& stage_plan : plan.stages) {
    PSTRAIN_RETURN_IF_ERROR(graph->AddStage(std::move(stage_plan)));
  }
  PSTRAIN_RETURN_IF_ERROR(graph->AllocateBuffers());
  // A variable several stages write (a shared layer's) gets a scratch
  // buffer for all but the first.
  graph->variable_written_.assign(spec.variables.size(), false);
  graph->variable_scratch_.resize(spec.variables.size());
  std::vector<int> writers(spec.variables.size(), 0);
  for (const std::unique_ptr<Stage>& stage : graph->stages_) {
    for (const int v : StageVariables(stage->plan)) ++writers[v];
  }
  for (size_t v = 0; v < writers.size(); ++v) {
    if (writers[v] < 2) continue;
    int64_t elements = 1;
    for (const int64_t d : spec.variables[v].shape().dims()) elements *= d;
    PSTRAIN_ASSIGN_OR_RETURN(graph->variable_scratch_[v], Buffer(elements));
  }
  return graph;
}

absl::Status LayerGraph::AddStage(StagePlan plan) {
  auto stage = std::make_unique<Stage>();
  Stage& s = *stage;
  s.plan = std::move(plan);
  const StagePlan& p = s.plan;
  const std::string& layer = p.layer;
  absl::Status status;
  switch (p.kind) {
    case StageKind::kEmbedding:
      s.embedding = p.embedding;
      s.embedding.ids *= batch_;
      break;
    case StageKind::kConv2D: {
      Conv2DShape shape = p.conv;
      shape.batch = batch_;
      status = TakeOp(layer, Conv2DOp::Create(shape, engine_), &s.conv);
      if (status.ok() && shape.fuse_relu) {
        // The convolution applies the ReLU; its backward runs here.
        status = TakeOp(layer, ReluOp::Create(batch_ * p.out_size, engine_),
                        &s.relu);
      }
      break;
    }
    case StageKind::kMaxPool2D: {
      MaxPool2DShape shape = p.pool;
      shape.batch = batch_;
      status = TakeOp(layer, MaxPool2DOp::Create(shape, engine_), &s.pool);
      break;
    }
    case StageKind::kDense: {
      DenseShape shape = p.dense;
      shape.batch *= batch_;  // Rows: the plan's are per example.
      status = TakeOp(layer, DenseOp::Create(shape, engine_), &s.dense);
      break;
    }
    case StageKind::kRelu:
      status =
          TakeOp(layer, ReluOp::Create(batch_ * p.in_size, engine_), &s.relu);
      break;
    case StageKind::kSoftmax: {
      SoftmaxShape shape = p.softmax;
      shape.batch *= batch_;
      status = TakeOp(layer, SoftmaxOp::Create(shape, engine_), &s.softmax);
      break;
    }
    case StageKind::kDropout:
      status =
          TakeOp(layer, DropoutOp::Create(batch_ * p.in_size, p.dropout_rate),
                 &s.dropout);
      break;
    case StageKind::kActivation: {
      ActivationShape shape = p.activation;
      shape.outer *= batch_;
      status = TakeOp(layer, ActivationOp::Create(shape), &s.activation);
      break;
    }
    case StageKind::kMerge:
    case StageKind::kRescaling:
      break;
    case StageKind::kConcatenate:
      for (const int64_t size : p.in_sizes) {
        s.concat_widths.push_back(size / p.concat_rows);
      }
      break;
    case StageKind::kBatchNormalization: {
      BatchNormShape shape;
      shape.channels = p.in_shapes[0].back();
      shape.rows = batch_ * (p.in_size / shape.channels);
      shape.epsilon = p.epsilon;
      shape.center = p.center;
      shape.scale = p.scale;
      s.batch_mean.resize(shape.channels);
      s.batch_variance.resize(shape.channels);
      status =
          TakeOp(layer, BatchNormOp::Create(shape, engine_), &s.batch_norm);
      break;
    }
    case StageKind::kLayerNormalization: {
      LayerNormShape shape;
      shape.width = p.in_shapes[0].back();
      shape.rows = batch_ * (p.in_size / shape.width);
      shape.epsilon = p.epsilon;
      shape.center = p.center;
      shape.scale = p.scale;
      status =
          TakeOp(layer, LayerNormOp::Create(shape, engine_), &s.layer_norm);
      break;
    }
    case StageKind::kAveragePooling2D: {
      AvgPool2DShape shape;
      shape.batch = batch_;
      shape.height = p.pool.height;
      shape.width = p.pool.width;
      shape.channels = p.pool.channels;
      shape.pool_h = p.pool.pool_h;
      shape.pool_w = p.pool.pool_w;
      shape.stride_h = p.pool.stride_h;
      shape.stride_w = p.pool.stride_w;
      shape.padding = p.pool.padding;
      status = TakeOp(layer, AvgPool2DOp::Create(shape, engine_), &s.avg_pool);
      break;
    }
    case StageKind::kGlobalPooling: {
      GlobalPoolShape shape;
      shape.batch = batch_;
      shape.channels = p.in_shapes[0].back();
      shape.steps = p.in_size / shape.channels;
      shape.mode =
          p.global_max ? GlobalPoolMode::kMax : GlobalPoolMode::kAverage;
      status = TakeOp(layer, GlobalPoolOp::Create(shape), &s.global_pool);
      break;
    }
    case StageKind::kZeroPadding2D: {
      ZeroPadding2DShape shape;
      shape.batch = batch_;
      shape.height = p.in_shapes[0][0];
      shape.width = p.in_shapes[0][1];
      shape.channels = p.in_shapes[0][2];
      shape.top = p.pad_top;
      shape.bottom = p.pad_bottom;
      shape.left = p.pad_left;
      shape.right = p.pad_right;
      status = TakeOp(layer, ZeroPadding2DOp::Create(shape), &s.zero_padding);
      break;
    }
    case StageKind::kMultiHeadAttention: {
      // Inputs query, value and maybe key (default: the value), each
      // [sequence, features].
      const std::vector<int64_t>& q = p.in_shapes[0];
      const std::vector<int64_t>& v = p.in_shapes[1];
      const std::vector<int64_t>& k =
          p.in_shapes.size() > 2 ? p.in_shapes[2] : v;
      AttentionShape shape;
      shape.batch = batch_;
      shape.tq = q[0];
      shape.dq = q[1];
      shape.tv = v[0];
      shape.dv = v[1];
      shape.dk = k[1];
      shape.heads = p.heads;
      shape.key_dim = p.key_dim;
      shape.value_dim = p.value_dim;
      shape.output_dim = p.output_dim;
      shape.use_bias = p.use_bias;
      shape.causal = p.causal;
      status = TakeOp(layer, AttentionOp::Create(shape, engine_), &s.attention);
      break;
    }
    case StageKind::kPermute: {
      PermuteShape shape;
      shape.batch = batch_;
      shape.in_dims = p.in_shapes[0];
      for (const int d : p.permutation) shape.dims.push_back(d + 1);
      status = TakeOp(layer, PermuteOp::Create(shape, engine_), &s.permute);
      break;
    }
  }
  PSTRAIN_RETURN_IF_ERROR(status);
  stages_.push_back(std::move(stage));
  return absl::OkStatus();
}

absl::Status LayerGraph::AllocateBuffers() {
  const int n = static_cast<int>(stages_.size());
  gradient_.assign(n, nullptr);
  written_.assign(n, false);
  // Per input position, the largest input gradient that may need one.
  std::vector<int64_t> scratch;
  // Backwards, so that an in-place stage's buffer exists before its input
  // (which it overwrites) shares it.
  for (int i = n - 1; i >= 0; --i) {
    Stage& s = *stages_[i];
    if (!s.plan.in_place) {
      PSTRAIN_ASSIGN_OR_RETURN(s.y, Buffer(batch_ * s.plan.out_size));
    }
    if (gradient_[i] == nullptr &&
        (s.plan.in_backward() || i == output_stage_)) {
      PSTRAIN_ASSIGN_OR_RETURN(Tensor buffer, Buffer(batch_ * s.plan.out_size));
      gradient_[i] = buffer.data<float>();
      gradient_buffers_.push_back(std::move(buffer));
    }
    if (s.plan.in_place && s.plan.in_backward()) {
      gradient_[s.plan.inputs[0].index] = gradient_[i];
    }
    for (size_t k = 0; k < s.plan.inputs.size(); ++k) {
      if (scratch.size() <= k) scratch.resize(k + 1, 0);
      if (s.plan.input_needs_dx[k]) {
        scratch[k] = std::max(scratch[k], batch_ * s.plan.in_sizes[k]);
      }
    }
  }
  scratch_.resize(scratch.size());
  for (size_t k = 0; k < scratch.size(); ++k) {
    if (scratch[k] > 0) {
      PSTRAIN_ASSIGN_OR_RETURN(scratch_[k], Buffer(scratch[k]));
    }
  }
  return absl::OkStatus();
}

const void* LayerGraph::Value(const TensorRef& ref) const {
  return ref.model_input ? inputs_[ref.index] : stages_[ref.index]->value;
}

absl::Status LayerGraph::Forward(absl::Span<const void* const> inputs,
                                 absl::Span<const float* const> weights,
                                 uint64_t weights_version,
                                 const DropoutStep* dropout) {
  if (inputs.size() != inputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("LayerGraph: ", inputs.size(), " inputs for a model of ",
                     inputs_.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("LayerGraph: input ", i, " is missing"));
    }
    inputs_[i] = inputs[i];
  }
  trained_forward_ = false;
  auto weight = [&](int index) {
    return index >= 0 ? weights[index] : nullptr;
  };
  for (const std::unique_ptr<Stage>& stage_ptr : stages_) {
    Stage& s = *stage_ptr;
    const StagePlan& p = s.plan;
    const float* x = static_cast<const float*>(Value(p.inputs[0]));
    float* y = p.in_place ? stages_[p.inputs[0].index]->out : s.y.data<float>();
    absl::Status status;
    switch (p.kind) {
      case StageKind::kEmbedding:
        status = EmbeddingForward(
            s.embedding, static_cast<const int32_t*>(Value(p.inputs[0])),
            weight(p.kernel), y);
        break;
      case StageKind::kConv2D:
        status = s.conv->Forward(x, weight(p.kernel), weights_version,
                                 weight(p.bias), y);
        break;
      case StageKind::kMaxPool2D:
        status = s.pool->Forward(x, y);
        break;
      case StageKind::kDense:
        status = s.dense->Forward(x, weight(p.kernel), weight(p.bias), y);
        break;
      case StageKind::kRelu:
        status = s.relu->Forward(x, y);
        break;
      case StageKind::kSoftmax:
        status = s.softmax->Forward(x, y);
        break;
      case StageKind::kDropout:
        if (dropout == nullptr) {
          // Inference: the identity; pass the input on untouched.
          s.out = nullptr;
          s.value = x;
          continue;
        } else {
          DropoutKey key;
          key.seed = p.dropout_seed;
          key.step = static_cast<uint64_t>(dropout->step);
          key.offset = DropoutElementOffset(dropout->example_offset, p.in_size);
          status = s.dropout->Forward(x, key, y);
        }
        break;
      case StageKind::kActivation:
        status = s.activation->Forward(x, y);
        break;
      case StageKind::kBatchNormalization:
        if (dropout != nullptr) {  // Training: the batch's statistics.
          status = s.batch_norm->ForwardTraining(
              x, weight(p.kernel), weight(p.bias), y, s.batch_mean.data(),
              s.batch_variance.data());
        } else {
          status = s.batch_norm->ForwardInference(
              x, weight(p.kernel), weight(p.bias), weight(p.moving_mean),
              weight(p.moving_variance), y);
        }
        break;
      case StageKind::kLayerNormalization:
        status = s.layer_norm->Forward(x, weight(p.kernel), weight(p.bias), y);
        break;
      case StageKind::kAveragePooling2D:
        status = s.avg_pool->Forward(x, y);
        break;
      case StageKind::kGlobalPooling:
        status = s.global_pool->Forward(x, y);
        break;
      case StageKind::kZeroPadding2D:
        status = s.zero_padding->Forward(x, y);
        break;
      case StageKind::kPermute:
        status = s.permute->Forward(x, y);
        break;
      case StageKind::kRescaling:
        for (int64_t i = 0; i < batch_ * p.out_size; ++i) {
          y[i] = x[i] * p.rescale + p.offset;
        }
        break;
      case StageKind::kMultiHeadAttention: {
        const float* value = static_cast<const float*>(Value(p.inputs[1]));
        const float* key = p.inputs.size() > 2
                               ? static_cast<const float*>(Value(p.inputs[2]))
                               : value;
        status = s.attention->Forward(x, key, value,
                                      AttentionWeightsOf(p, weights), y);
        break;
      }
      case StageKind::kMerge:
      case StageKind::kConcatenate: {
        std::vector<const float*> xs;
        for (const TensorRef& ref : p.inputs) {
          xs.push_back(static_cast<const float*>(Value(ref)));
        }
        if (p.kind == StageKind::kMerge) {
          MergeForward(p.merge, xs, batch_ * p.out_size, y);
        } else {
          ConcatForward(xs, s.concat_widths, batch_ * p.concat_rows, y);
        }
        break;
      }
    }
    if (!status.ok()) return InLayer(p.layer, status);
    s.out = y;
    s.value = y;
  }
  output_ = static_cast<const float*>(stages_[output_stage_]->value);
  trained_forward_ = dropout != nullptr;
  return absl::OkStatus();
}

float* LayerGraph::GradientTarget(int s, int i) {
  const StagePlan& p = stages_[s]->plan;
  if (!p.input_needs_dx[i]) return nullptr;
  const int from = p.inputs[i].index;  // A stage: model inputs need none.
  if (!written_[from]) return gradient_[from];
  return scratch_[i].data<float>();
}

void LayerGraph::AddScratch(int s, int i) {
  const StagePlan& p = stages_[s]->plan;
  if (!p.input_needs_dx[i]) return;
  const int from = p.inputs[i].index;
  if (!written_[from]) {
    written_[from] = true;
    return;
  }
  float* g = gradient_[from];
  const float* add = scratch_[i].data<float>();
  const int64_t n = batch_ * p.in_sizes[i];
  for (int64_t k = 0; k < n; ++k) g[k] += add[k];
}

absl::Status LayerGraph::Backward(absl::Span<const float* const> weights,
                                  uint64_t weights_version,
                                  absl::Span<float* const> gradients) {
  if (!trained_forward_) {
    return absl::FailedPreconditionError(
        "LayerGraph: Backward needs a training Forward first");
  }
  std::fill(written_.begin(), written_.end(), false);
  written_[output_stage_] = true;
  std::fill(variable_written_.begin(), variable_written_.end(), false);
  // What each stage writes its variables' gradients into: `gradients`, or
  // for a variable a stage before (in backward order) wrote already, its
  // scratch buffer, added afterwards: a shared layer's gradients sum.
  std::vector<float*> stage_gradients(gradients.begin(), gradients.end());
  for (int i = static_cast<int>(stages_.size()) - 1; i >= 0; --i) {
    const StagePlan& p = stages_[i]->plan;
    if (!p.in_backward()) continue;
    if (!written_[i]) {
      return absl::InternalError(absl::StrCat(
          "LayerGraph: no gradient reached layer '", p.layer, "'"));
    }
    const std::vector<int> variables = StageVariables(p);
    for (const int v : variables) {
      stage_gradients[v] = variable_written_[v]
                               ? variable_scratch_[v].data<float>()
                               : gradients[v];
    }
    PSTRAIN_RETURN_IF_ERROR(
        BackwardStage(i, weights, weights_version, stage_gradients));
    for (const int v : variables) {
      if (variable_written_[v]) {
        float* sum = gradients[v];
        const float* add = variable_scratch_[v].data<float>();
        for (int64_t k = 0; k < variable_scratch_[v].num_elements(); ++k) {
          sum[k] += add[k];
        }
      }
      variable_written_[v] = true;
    }
  }
  return absl::OkStatus();
}

absl::Status LayerGraph::BackwardStage(int i,
                                       absl::Span<const float* const> weights,
                                       uint64_t weights_version,
                                       absl::Span<float* const> gradients) {
  auto weight = [&](int index) {
    return index >= 0 ? weights[index] : nullptr;
  };
  auto gradient = [&](int index) {
    return index >= 0 ? gradients[index] : nullptr;
  };
  Stage& s = *stages_[i];
  const StagePlan& p = s.plan;
  float* g = gradient_[i];
  const float* x = static_cast<const float*>(Value(p.inputs[0]));
  float* dx = GradientTarget(i, 0);
  absl::Status status;
  switch (p.kind) {
    case StageKind::kEmbedding:
      status = EmbeddingBackward(
          s.embedding, static_cast<const int32_t*>(Value(p.inputs[0])), g,
          gradient(p.kernel));
      break;
    case StageKind::kConv2D:
      if (s.relu != nullptr) status = s.relu->Backward(s.out, g, g);
      if (!status.ok()) break;
      status = s.conv->Backward(x, weight(p.kernel), weights_version, g, dx,
                                gradient(p.kernel), gradient(p.bias));
      break;
    case StageKind::kMaxPool2D:
      status = s.pool->Backward(g, dx);
      break;
    case StageKind::kDense:
      status = s.dense->Backward(x, weight(p.kernel), g, dx, gradient(p.kernel),
                                 gradient(p.bias));
      break;
    case StageKind::kRelu:
      status = s.relu->Backward(s.out, g, dx);
      break;
    case StageKind::kSoftmax:
      status = s.softmax->Backward(s.out, g, dx);
      break;
    case StageKind::kDropout:
      status = s.dropout->Backward(g, dx);
      break;
    case StageKind::kActivation:
      status = s.activation->Backward(x, s.out, g, dx);
      break;
    case StageKind::kBatchNormalization:
      status = s.batch_norm->Backward(x, weight(p.kernel), g, dx,
                                      gradient(p.kernel), gradient(p.bias));
      // The moving statistics take the batch's, summed over its examples
      // as gradients are (the ps averages them over the step's).
      for (size_t c = 0; c < s.batch_mean.size(); ++c) {
        gradient(p.moving_mean)[c] = s.batch_mean[c] * batch_;
        gradient(p.moving_variance)[c] = s.batch_variance[c] * batch_;
      }
      break;
    case StageKind::kLayerNormalization:
      status = s.layer_norm->Backward(x, weight(p.kernel), g, dx,
                                      gradient(p.kernel), gradient(p.bias));
      break;
    case StageKind::kAveragePooling2D:
      if (dx != nullptr) status = s.avg_pool->Backward(g, dx);
      break;
    case StageKind::kGlobalPooling:
      if (dx != nullptr) status = s.global_pool->Backward(g, dx);
      break;
    case StageKind::kZeroPadding2D:
      if (dx != nullptr) status = s.zero_padding->Backward(g, dx);
      break;
    case StageKind::kPermute:
      if (dx != nullptr) status = s.permute->Backward(g, dx);
      break;
    case StageKind::kRescaling:
      for (int64_t i = 0; dx != nullptr && i < batch_ * p.in_size; ++i) {
        dx[i] = g[i] * p.rescale;
      }
      break;
    case StageKind::kMultiHeadAttention: {
      // Inputs reading one tensor share one target: the op sums into it.
      std::vector<float*> targets(p.inputs.size(), nullptr);
      std::vector<bool> first(p.inputs.size(), true);
      for (size_t k = 0; k < p.inputs.size(); ++k) {
        for (size_t j = 0; j < k; ++j) {
          if (p.inputs[j] == p.inputs[k]) {
            targets[k] = targets[j];
            first[k] = false;
          }
        }
        if (first[k]) targets[k] = GradientTarget(i, static_cast<int>(k));
      }
      const std::vector<float*> dw = AttentionBuffers(p, gradients);
      AttentionGradients grads;
      grads.query_kernel = dw[0];
      grads.query_bias = dw[1];
      grads.key_kernel = dw[2];
      grads.key_bias = dw[3];
      grads.value_kernel = dw[4];
      grads.value_bias = dw[5];
      grads.output_kernel = dw[6];
      grads.output_bias = dw[7];
      grads.query = targets[0];
      grads.value = targets[1];
      // Keras's key defaults to the value: its gradient adds there.
      grads.key = p.inputs.size() > 2 ? targets[2] : targets[1];
      const float* value = static_cast<const float*>(Value(p.inputs[1]));
      const float* key = p.inputs.size() > 2
                             ? static_cast<const float*>(Value(p.inputs[2]))
                             : value;
      status = s.attention->Backward(x, key, value,
                                     AttentionWeightsOf(p, weights), g, grads);
      if (!status.ok()) return InLayer(p.layer, status);
      for (size_t k = 0; k < p.inputs.size(); ++k) {
        if (first[k]) AddScratch(i, static_cast<int>(k));
      }
      return absl::OkStatus();
    }
    case StageKind::kMerge:
    case StageKind::kConcatenate: {
      std::vector<const float*> xs;
      for (const TensorRef& ref : p.inputs) {
        xs.push_back(static_cast<const float*>(Value(ref)));
      }
      // One input at a time: each may need the scratch buffer.
      for (size_t k = 0; k < p.inputs.size(); ++k) {
        float* target = GradientTarget(i, static_cast<int>(k));
        if (target == nullptr) return absl::OkStatus();
        if (p.kind == StageKind::kMerge) {
          MergeBackward(p.merge, xs, g, batch_ * p.out_size,
                        static_cast<int>(k), target);
        } else {
          ConcatBackward(g, s.concat_widths, batch_ * p.concat_rows,
                         static_cast<int>(k), target);
        }
        AddScratch(i, static_cast<int>(k));
      }
      return absl::OkStatus();
    }
  }
  if (!status.ok()) return InLayer(p.layer, status);
  AddScratch(i, 0);
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

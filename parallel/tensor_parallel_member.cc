#include "parallel/tensor_parallel_member.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "compute/loss_config.h"

namespace pstrain {
namespace parallel {
namespace {

using worker::Activation;
using worker::LayerKind;
using worker::LayerSpec;
using worker::ModelSpec;
namespace cpu = worker::cpu;

constexpr absl::string_view kName = "TensorParallelMember";

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::Status LayerError(const LayerSpec& layer, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(kName, ": layer '", layer.name, "': ", problem));
}

// The layer's activation: a Dense's own, an activation layer's, else none.
Activation ActivationOf(const LayerSpec& layer) {
  return layer.kind == LayerKind::kDense || layer.kind == LayerKind::kActivation
             ? layer.activation
             : Activation::kLinear;
}

// A VariableDef of `name` in `shape`, for CheckVariableTensor.
VariableDef LocalDef(const std::string& name,
                     const std::vector<int64_t>& shape) {
  VariableDef def;
  def.set_name(name);
  for (int64_t d : shape) def.mutable_shape()->add_dims(d);
  return def;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TensorParallelMember>>
TensorParallelMember::Create(const ModelSpec& spec,
                             const TensorParallelPlan& plan,
                             GroupCollective* group,
                             const TensorParallelMemberOptions& options) {
  if (group == nullptr || group->size() != plan.model_size ||
      group->rank() != plan.member) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": the plan is member ", plan.member, " of ", plan.model_size,
        ", the group collective ",
        group == nullptr ? std::string("missing")
                         : absl::StrCat("member ", group->rank(), " of ",
                                        group->size())));
  }
  if (plan.layers.size() != spec.layers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": the plan is not the model's"));
  }
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": num_threads must be >= 0"));
  }
  auto member = std::unique_ptr<TensorParallelMember>(
      new TensorParallelMember(spec, plan, group, options));
  PSTRAIN_RETURN_IF_ERROR(member->Init());
  return member;
}

TensorParallelMember::TensorParallelMember(
    const ModelSpec& spec, const TensorParallelPlan& plan,
    GroupCollective* group, const TensorParallelMemberOptions& options)
    : spec_(spec),
      plan_(plan),
      group_(group),
      options_(options),
      rng_(options.run_seed, /*replica=*/0) {}

absl::Status TensorParallelMember::CheckModel(const ModelSpec& spec) {
  if (spec.inputs.size() != 1 || spec.input_dtype != DT_FLOAT) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": this version runs models of one float32 input"));
  }
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& layer = spec.layers[i];
    const worker::TensorRef previous{/*model_input=*/i == 0,
                                     /*index=*/i == 0 ? 0 : int(i) - 1};
    if (layer.inputs.size() != 1 || !(layer.inputs[0] == previous)) {
      return LayerError(layer, "does not read the layer before it; this "
                               "version runs a chain of layers");
    }
    switch (layer.kind) {
      case LayerKind::kFlatten:
      case LayerKind::kReshape:
      case LayerKind::kDropout:
      case LayerKind::kActivation:
        break;
      case LayerKind::kDense:
        if (layer.kernel_regularizer.active() ||
            layer.bias_regularizer.active()) {
          return LayerError(layer, "has a regularizer, which this version "
                                   "does not run tensor-parallel");
        }
        if (layer.input_shape.size() != 1) {
          return LayerError(layer, "reads an input of rank above 1, which "
                                   "this version does not run");
        }
        break;
      default:
        return LayerError(layer,
                          "is not a Flatten, Reshape, Dense, Dropout or "
                          "activation layer, which this version runs");
    }
  }
  if (spec.outputs.size() != 1 ||
      spec.outputs[0] != static_cast<int>(spec.layers.size()) - 1 ||
      spec.output_shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": the model's output must be its last layer's, one vector "
               "per example"));
  }
  return absl::OkStatus();
}

absl::Status TensorParallelMember::Init() {
  PSTRAIN_RETURN_IF_ERROR(CheckModel(spec_));
  const worker::LossPlan loss_plan =
      worker::PlanLoss(spec_, options_.loss, options_.loss_input);
  strip_final_activation_ = loss_plan.strip_final_activation;
  output_is_logits_ = loss_plan.output_is_logits;
  loss_ = std::make_unique<cpu::LabelLoss>(options_.loss, output_is_logits_,
                                           spec_.output_shape[0]);
  cpu::EngineOptions engine_options;
  engine_options.num_threads = options_.num_threads;
  PSTRAIN_ASSIGN_OR_RETURN(engine_, cpu::Engine::Create(engine_options));
  layers_.resize(spec_.layers.size());
  weights_.assign(spec_.layers.size(), nullptr);
  biases_.assign(spec_.layers.size(), nullptr);
  return absl::OkStatus();
}

absl::Status TensorParallelMember::Prepare(int64_t batch) {
  if (batch == batch_) return absl::OkStatus();
  const int64_t m = plan_.model_size;
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    const LayerSpec& layer = spec_.layers[i];
    const ParallelLayer& p = plan_.layers[i];
    LayerState& s = layers_[i];
    s.full_in = Elements(layer.input_shape);
    s.full_out = Elements(layer.output_shape);
    s.in_width = p.input_split && !p.gather_input ? s.full_in / m : s.full_in;
    if (p.slice_input) s.in_width = s.full_in / m;
    s.out_width = p.output_split ? s.full_out / m : s.full_out;
    s.dense.reset();
    s.activation.reset();
    s.dropout.reset();
    if (layer.kind == LayerKind::kDense) {
      cpu::DenseShape shape;
      shape.batch = batch;
      shape.in = s.in_width;
      shape.out = s.out_width;
      shape.use_bias = layer.use_bias && p.form != ParallelForm::kRowParallel;
      shape.compute_dx = p.needs_input_gradient;
      PSTRAIN_ASSIGN_OR_RETURN(s.dense,
                               cpu::DenseOp::Create(shape, engine_.get()));
    }
    Activation activation = ActivationOf(layer);
    if (strip_final_activation_ && i + 1 == spec_.layers.size()) {
      activation = Activation::kLinear;
    }
    if (activation != Activation::kLinear && activation != Activation::kRelu) {
      cpu::ActivationShape shape;
      shape.activation = activation;
      shape.params = layer.activation_params;
      shape.outer = batch;
      shape.axis = s.out_width;
      PSTRAIN_ASSIGN_OR_RETURN(s.activation, cpu::ActivationOp::Create(shape));
    }
    if (layer.kind == LayerKind::kDropout && layer.rate > 0) {
      PSTRAIN_ASSIGN_OR_RETURN(s.dropout,
                               cpu::DropoutOp::Create(s.out_width, layer.rate));
      s.dropout_seed = rng_.GlobalSeed(layer.name);
      s.mask.assign(batch * s.out_width, 0);
    }
    s.input.assign(batch * s.in_width, 0.0f);
    s.dinput.assign(batch * s.in_width, 0.0f);
    s.pre.assign(batch * s.out_width, 0.0f);
    s.out.assign(batch * s.out_width, 0.0f);
    s.dpre.assign(batch * s.out_width, 0.0f);
    s.dout.assign(batch * (p.input_split ? s.full_in / m : s.full_in), 0.0f);
  }
  output_.assign(batch * spec_.output_shape[0], 0.0f);
  doutput_.assign(output_.size(), 0.0f);
  batch_ = batch;
  return absl::OkStatus();
}

void TensorParallelMember::TakeColumns(const float* whole, int64_t batch,
                                       int64_t full, int64_t begin,
                                       int64_t width, float* slice) {
  for (int64_t r = 0; r < batch; ++r) {
    std::copy(whole + r * full + begin, whole + r * full + begin + width,
              slice + r * width);
  }
}

absl::Status TensorParallelMember::GatherColumns(const float* slice,
                                                 int64_t batch, int64_t width,
                                                 float* whole) {
  const int64_t m = plan_.model_size;
  gather_scratch_.resize(m * batch * width);
  PSTRAIN_RETURN_IF_ERROR(group_->AllGather(
      absl::MakeConstSpan(slice, batch * width),
      absl::MakeSpan(gather_scratch_)));
  // Member k's [batch, width] piece holds columns [k * width, (k+1) * width).
  for (int64_t k = 0; k < m; ++k) {
    const float* piece = gather_scratch_.data() + k * batch * width;
    for (int64_t r = 0; r < batch; ++r) {
      std::copy(piece + r * width, piece + (r + 1) * width,
                whole + r * m * width + k * width);
    }
  }
  return absl::OkStatus();
}

absl::Status TensorParallelMember::Forward(const worker::StepInput& input,
                                           bool training) {
  const int64_t batch = input.batch;
  const int64_t m = plan_.model_size;
  const float* x = static_cast<const float*>(input.features);
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    const LayerSpec& layer = spec_.layers[i];
    const ParallelLayer& p = plan_.layers[i];
    LayerState& s = layers_[i];
    if (p.gather_input) {
      PSTRAIN_RETURN_IF_ERROR(
          GatherColumns(x, batch, s.full_in / m, s.input.data()));
    } else if (p.slice_input) {
      TakeColumns(x, batch, s.full_in, plan_.member * s.in_width, s.in_width,
                  s.input.data());
    } else {
      std::copy(x, x + batch * s.in_width, s.input.begin());
    }
    const float* read = s.input.data();
    const int64_t n = batch * s.out_width;
    switch (layer.kind) {
      case LayerKind::kDense: {
        PSTRAIN_RETURN_IF_ERROR(s.dense->Forward(
            read, weights_[i],
            p.form == ParallelForm::kRowParallel ? nullptr : biases_[i],
            s.pre.data()));
        if (p.reduce_output) {
          PSTRAIN_RETURN_IF_ERROR(group_->AllReduceSum(absl::MakeSpan(s.pre)));
          if (biases_[i] != nullptr) {
            for (int64_t r = 0; r < batch; ++r) {
              for (int64_t c = 0; c < s.out_width; ++c) {
                s.pre[r * s.out_width + c] += biases_[i][c];
              }
            }
          }
        }
        break;
      }
      case LayerKind::kDropout:
        if (s.dropout == nullptr || !training) {
          std::copy(read, read + n, s.pre.begin());
          break;
        }
        {
          const int64_t first_column =
              p.output_split ? plan_.member * s.out_width : 0;
          for (int64_t r = 0; r < batch; ++r) {
            cpu::DropoutKey key;
            key.seed = s.dropout_seed;
            key.step = static_cast<uint64_t>(input.step);
            key.offset = static_cast<uint64_t>(input.example_offset + r) *
                             static_cast<uint64_t>(s.full_out) +
                         static_cast<uint64_t>(first_column);
            PSTRAIN_RETURN_IF_ERROR(s.dropout->Forward(
                read + r * s.out_width, key, s.pre.data() + r * s.out_width));
            std::copy(s.dropout->mask().begin(), s.dropout->mask().end(),
                      s.mask.begin() + r * s.out_width);
          }
        }
        break;
      default:  // Flatten, Reshape, an activation layer: `pre` is the input.
        std::copy(read, read + n, s.pre.begin());
        break;
    }
    if (s.activation != nullptr) {
      PSTRAIN_RETURN_IF_ERROR(s.activation->Forward(s.pre.data(),
                                                    s.out.data()));
    } else if (ActivationOf(layer) == Activation::kRelu) {
      for (int64_t k = 0; k < n; ++k) s.out[k] = std::max(s.pre[k], 0.0f);
    } else {
      std::copy(s.pre.begin(), s.pre.end(), s.out.begin());
    }
    x = s.out.data();
  }
  const LayerState& last = layers_.back();
  if (plan_.gather_output) {
    return GatherColumns(x, batch, last.out_width, output_.data());
  }
  std::copy(x, x + batch * last.out_width, output_.begin());
  return absl::OkStatus();
}

absl::Status TensorParallelMember::Backward(const float* doutput,
                                            const worker::StepInput& input,
                                            worker::Gradients* gradients) {
  const int64_t batch = input.batch;
  const int64_t m = plan_.model_size;
  // The gradient of the last layer's output, in its form.
  std::vector<float> last_grad(batch * layers_.back().out_width);
  if (plan_.gather_output) {
    const LayerState& last = layers_.back();
    TakeColumns(doutput, batch, last.full_out, plan_.member * last.out_width,
                last.out_width, last_grad.data());
  } else {
    std::copy(doutput, doutput + last_grad.size(), last_grad.begin());
  }
  const float* g = last_grad.data();
  for (int i = static_cast<int>(spec_.layers.size()) - 1; i >= 0; --i) {
    const LayerSpec& layer = spec_.layers[i];
    const ParallelLayer& p = plan_.layers[i];
    LayerState& s = layers_[i];
    const int64_t n = batch * s.out_width;
    // Through the activation: dpre.
    if (s.activation != nullptr) {
      PSTRAIN_RETURN_IF_ERROR(s.activation->Backward(
          s.pre.data(), s.out.data(), g, s.dpre.data()));
    } else if (ActivationOf(layer) == Activation::kRelu) {
      for (int64_t k = 0; k < n; ++k) {
        s.dpre[k] = s.out[k] > 0.0f ? g[k] : 0.0f;
      }
    } else {
      std::copy(g, g + n, s.dpre.begin());
    }
    // Through the layer: dinput, and the variables' gradients.
    float* dx = p.needs_input_gradient ? s.dinput.data() : nullptr;
    switch (layer.kind) {
      case LayerKind::kDense: {
        float* dw = gradients->at(layer.variables[0])->data<float>();
        const bool row = p.form == ParallelForm::kRowParallel;
        float* db = layer.use_bias
                        ? gradients->at(layer.variables[1])->data<float>()
                        : nullptr;
        PSTRAIN_RETURN_IF_ERROR(s.dense->Backward(s.input.data(), weights_[i],
                                                  s.dpre.data(), dx, dw,
                                                  row ? nullptr : db));
        if (row && db != nullptr) {
          // The bias was added once, after the sum: its gradient is the
          // whole dpre's column sums, the same on every member.
          std::fill(db, db + s.out_width, 0.0f);
          for (int64_t r = 0; r < batch; ++r) {
            for (int64_t c = 0; c < s.out_width; ++c) {
              db[c] += s.dpre[r * s.out_width + c];
            }
          }
        }
        if (p.reduce_input_gradient && dx != nullptr) {
          PSTRAIN_RETURN_IF_ERROR(
              group_->AllReduceSum(absl::MakeSpan(s.dinput)));
        }
        break;
      }
      case LayerKind::kDropout:
        if (dx == nullptr) break;
        if (s.dropout == nullptr) {
          std::copy(s.dpre.begin(), s.dpre.end(), s.dinput.begin());
        } else {
          const float scale = s.dropout->scale();
          for (int64_t k = 0; k < n; ++k) {
            s.dinput[k] = s.mask[k] ? s.dpre[k] * scale : 0.0f;
          }
        }
        break;
      default:
        if (dx != nullptr) {
          std::copy(s.dpre.begin(), s.dpre.end(), s.dinput.begin());
        }
        break;
    }
    if (!p.needs_input_gradient) break;  // Nothing trainable before.
    // The gradient of the input in the form it arrived in.
    if (p.gather_input) {
      TakeColumns(s.dinput.data(), batch, s.full_in,
                  plan_.member * (s.full_in / m), s.full_in / m,
                  s.dout.data());
    } else if (p.slice_input) {
      PSTRAIN_RETURN_IF_ERROR(
          GatherColumns(s.dinput.data(), batch, s.in_width, s.dout.data()));
    } else {
      std::copy(s.dinput.begin(), s.dinput.end(), s.dout.begin());
    }
    g = s.dout.data();
  }
  return absl::OkStatus();
}

absl::Status TensorParallelMember::ResolveVariables(
    const worker::Weights& weights, worker::Gradients* gradients) {
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    const LayerSpec& layer = spec_.layers[i];
    for (size_t v = 0; v < layer.variables.size(); ++v) {
      const std::string& name = layer.variables[v];
      const VariableDef def =
          LocalDef(name, plan_.variables.at(name).local_shape);
      auto w = weights.find(name);
      PSTRAIN_RETURN_IF_ERROR(worker::CheckVariableTensor(
          kName, "weight", def, w == weights.end() ? nullptr : w->second));
      if (gradients != nullptr) {
        auto d = gradients->find(name);
        PSTRAIN_RETURN_IF_ERROR(worker::CheckVariableTensor(
            kName, "gradient", def,
            d == gradients->end() ? nullptr : d->second));
      }
      (v == 0 ? weights_[i] : biases_[i]) = w->second->data<float>();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<worker::StepResult> TensorParallelMember::TrainStep(
    const worker::StepInput& input, const worker::Weights& weights,
    worker::Gradients* gradients) {
  PSTRAIN_RETURN_IF_ERROR(worker::CheckStepInput(kName, input, 0));
  if (gradients == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": gradients are required"));
  }
  PSTRAIN_RETURN_IF_ERROR(ResolveVariables(weights, gradients));
  if (input.batch == 0) return worker::StepResult();
  PSTRAIN_RETURN_IF_ERROR(Prepare(input.batch));
  PSTRAIN_RETURN_IF_ERROR(Forward(input, /*training=*/true));
  PSTRAIN_ASSIGN_OR_RETURN(
      cpu::LabelLoss::Result loss,
      loss_->Compute(output_.data(), input.labels, input.batch,
                     doutput_.data(), /*scores=*/nullptr));
  PSTRAIN_RETURN_IF_ERROR(Backward(doutput_.data(), input, gradients));
  worker::StepResult result;
  result.loss_sum = loss.loss_sum;
  result.correct = loss.correct;
  result.examples = input.batch;
  return result;
}

absl::StatusOr<worker::StepResult> TensorParallelMember::Evaluate(
    const worker::StepInput& input, const worker::Weights& weights) {
  PSTRAIN_RETURN_IF_ERROR(worker::CheckStepInput(kName, input, 0));
  PSTRAIN_RETURN_IF_ERROR(ResolveVariables(weights, nullptr));
  if (input.batch == 0) return worker::StepResult();
  PSTRAIN_RETURN_IF_ERROR(Prepare(input.batch));
  PSTRAIN_RETURN_IF_ERROR(Forward(input, /*training=*/false));
  PSTRAIN_ASSIGN_OR_RETURN(
      cpu::LabelLoss::Result loss,
      loss_->Compute(output_.data(), input.labels, input.batch,
                     /*doutput=*/nullptr, /*scores=*/nullptr));
  worker::StepResult result;
  result.loss_sum = loss.loss_sum;
  result.correct = loss.correct;
  result.examples = input.batch;
  return result;
}

}  // namespace parallel
}  // namespace pstrain

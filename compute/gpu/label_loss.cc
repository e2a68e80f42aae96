#include "compute/gpu/label_loss.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compute/cpu/losses.h"

namespace pstrain {
namespace worker {
namespace gpu {

absl::StatusOr<std::unique_ptr<LabelLoss>> LabelLoss::Create(
    LossKind kind, bool output_is_logits, int64_t outputs, Device* device) {
  if (outputs <= 0 || device == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("LabelLoss: outputs must be positive (got ", outputs,
                     ") and a device is required"));
  }
  return std::unique_ptr<LabelLoss>(
      new LabelLoss(kind, output_is_logits, outputs, device));
}

absl::Status LabelLoss::Reserve(int64_t n) {
  if (losses_ == nullptr || losses_->max_batch() < n) {
    losses_.reset();
    PSTRAIN_ASSIGN_OR_RETURN(losses_, Losses::Create(n, device_));
  }
  const int64_t bytes = n * outputs_ * static_cast<int64_t>(sizeof(float));
  if (static_cast<int64_t>(targets_.bytes()) < bytes) {
    targets_ = DeviceBuffer();  // Free first: the GPU may not hold both.
    PSTRAIN_ASSIGN_OR_RETURN(targets_, device_->Allocate(bytes));
  }
  return absl::OkStatus();
}

absl::Status LabelLoss::UploadTargets(const int32_t* labels, int64_t n,
                                      int64_t first_example,
                                      bool one_output_is_value) {
  host_targets_.assign(n * outputs_, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = labels[i];
    if (outputs_ == 1 && one_output_is_value) {
      host_targets_[i] = static_cast<float>(label);
    } else if (label >= 0 && label < outputs_) {
      host_targets_[i * outputs_ + label] = 1.0f;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(LossKindName(kind_), ": label ", label, " of example ",
                       first_example + i, " is outside [0, ", outputs_, ")"));
    }
  }
  return device_->CopyToDevice(host_targets_.data(),
                               n * outputs_ * sizeof(float), targets_.data());
}

absl::StatusOr<double> LabelLoss::LossSum(const float* output,
                                          const int32_t* host_labels,
                                          const int32_t* device_labels,
                                          int64_t n, int64_t first_example,
                                          float* doutput) {
  Losses& losses = *losses_;
  const float* targets = targets_.floats();
  switch (kind_) {
    case LossKind::kSparseCrossEntropy:
      return output_is_logits_
                 ? losses.SparseSoftmaxCrossEntropyFromLogits(
                       output, device_labels, n, outputs_, doutput)
                 : losses.SparseCrossEntropyFromProbabilities(
                       output, device_labels, n, outputs_, doutput);
    case LossKind::kCategoricalCrossEntropy:
      PSTRAIN_RETURN_IF_ERROR(UploadTargets(host_labels, n, first_example,
                                            /*one_output_is_value=*/false));
      return output_is_logits_
                 ? losses.SoftmaxCrossEntropyFromLogits(output, targets, n,
                                                        outputs_, doutput)
                 : losses.CategoricalCrossEntropyFromProbabilities(
                       output, targets, n, outputs_, doutput);
    case LossKind::kBinaryCrossEntropy:
      if (outputs_ != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "binary_crossentropy takes one output unit per example, not ",
            outputs_));
      }
      return output_is_logits_ ? losses.SigmoidCrossEntropyFromLogits(
                                     output, device_labels, n, doutput)
                               : losses.BinaryCrossEntropyFromProbabilities(
                                     output, device_labels, n, doutput);
    case LossKind::kMeanSquaredError:
    case LossKind::kMeanAbsoluteError:
    case LossKind::kHuber:
      PSTRAIN_RETURN_IF_ERROR(UploadTargets(host_labels, n, first_example,
                                            /*one_output_is_value=*/true));
      if (kind_ == LossKind::kMeanSquaredError) {
        return losses.MeanSquaredErrorSum(output, targets, n, outputs_,
                                          doutput);
      }
      if (kind_ == LossKind::kMeanAbsoluteError) {
        return losses.MeanAbsoluteErrorSum(output, targets, n, outputs_,
                                           doutput);
      }
      return losses.HuberSum(output, targets, n, outputs_, cpu::kHuberDelta,
                             doutput);
  }
  return absl::InvalidArgumentError("LabelLoss: unknown loss");
}

absl::StatusOr<int64_t> LabelLoss::CountCorrect(const float* output,
                                                const int32_t* host_labels,
                                                const int32_t* device_labels,
                                                int64_t n) {
  if (kind_ == LossKind::kBinaryCrossEntropy) {
    return losses_->CountBinaryCorrect(output, output_is_logits_,
                                       device_labels, n);
  }
  if (outputs_ > 1) {
    return losses_->CountCorrect(output, device_labels, n, outputs_);
  }
  // One output: correct when it rounds to the label, as on the CPU.
  host_outputs_.resize(n);
  PSTRAIN_RETURN_IF_ERROR(
      device_->CopyToHost(output, n * sizeof(float), host_outputs_.data()));
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::lround(host_outputs_[i]) == host_labels[i]) ++correct;
  }
  return correct;
}

absl::StatusOr<LabelLoss::Result> LabelLoss::Compute(
    const float* output, const int32_t* host_labels,
    const int32_t* device_labels, int64_t n, int64_t first_example,
    float* doutput) {
  PSTRAIN_RETURN_IF_ERROR(Reserve(n));
  Result result;
  PSTRAIN_ASSIGN_OR_RETURN(result.loss_sum,
                           LossSum(output, host_labels, device_labels, n,
                                   first_example, doutput));
  PSTRAIN_ASSIGN_OR_RETURN(
      result.correct, CountCorrect(output, host_labels, device_labels, n));
  return result;
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#include "compute/gpu/losses.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "compute/cpu/losses.h"
#include "compute/gpu/kernels.h"
#include "compute/gpu/loss_kernels.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

constexpr unsigned long long kNoBadRow = ~0ull;
// Keras clips in the tensor's dtype: float32 bounds, as the CPU's losses.
constexpr float kLow = cpu::kKerasEpsilon;
constexpr float kHigh = 1.0f - cpu::kKerasEpsilon;

void FreeHost(void* p) {
  if (p == nullptr) return;
  const cudaError_t error = cudaFreeHost(p);
  if (error != cudaSuccess) {
    std::fprintf(stderr, "pstrain gpu: cudaFreeHost failed: %s\n",
                 cudaGetErrorString(error));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Losses>> Losses::Create(int64_t max_batch,
                                                       Device* device) {
  if (max_batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Losses: max_batch must be positive, got ", max_batch));
  }
  if (device == nullptr) {
    return absl::InvalidArgumentError("Losses: device is required");
  }
  std::unique_ptr<Losses> losses(new Losses(max_batch, device));
  PSTRAIN_ASSIGN_OR_RETURN(
      losses->row_out_, device->Allocate(max_batch * int64_t{sizeof(double)}));
  PSTRAIN_ASSIGN_OR_RETURN(
      losses->bad_row_, device->Allocate(int64_t{sizeof(unsigned long long)}));
  void* rows = nullptr;
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaMallocHost(&rows, max_batch * sizeof(double)),
                 "Losses: cudaMallocHost"));
  losses->host_rows_ = static_cast<double*>(rows);
  void* bad = nullptr;
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(cudaMallocHost(&bad, sizeof(unsigned long long)),
                 "Losses: cudaMallocHost"));
  losses->host_bad_row_ = static_cast<unsigned long long*>(bad);
  return losses;
}

Losses::~Losses() {
  FreeHost(host_rows_);
  FreeHost(host_bad_row_);
}

absl::Status Losses::CheckArgs(const char* loss, const void* input,
                               const void* second_input, int64_t batch,
                               int64_t classes) const {
  if (batch <= 0 || classes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(loss, ": batch and classes must be positive, got ", batch,
                     " and ", classes));
  }
  if (batch > max_batch_) {
    return absl::InvalidArgumentError(absl::StrCat(
        loss, ": batch ", batch, " exceeds max_batch ", max_batch_));
  }
  if (input == nullptr || second_input == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(loss, ": inputs are required"));
  }
  return absl::OkStatus();
}

absl::Status Losses::ResetBadRow(const char* loss) {
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  return CudaStatus(cudaMemsetAsync(bad_row_.data(), 0xff, bad_row_.bytes(),
                                    device_->stream()),
                    absl::StrCat(loss, ": cudaMemsetAsync"));
}

absl::StatusOr<double> Losses::Finish(const char* loss, const int32_t* labels,
                                      int64_t batch, int64_t classes,
                                      bool binary) {
  cudaStream_t stream = device_->stream();
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(host_rows_, row_out_.data(), batch * sizeof(double),
                      cudaMemcpyDeviceToHost, stream),
      absl::StrCat(loss, ": cudaMemcpyAsync")));
  if (labels != nullptr) {
    PSTRAIN_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(host_bad_row_, bad_row_.data(), bad_row_.bytes(),
                        cudaMemcpyDeviceToHost, stream),
        absl::StrCat(loss, ": cudaMemcpyAsync")));
  }
  PSTRAIN_RETURN_IF_ERROR(device_->Synchronize());
  if (labels != nullptr && *host_bad_row_ != kNoBadRow) {
    const int64_t row = static_cast<int64_t>(*host_bad_row_);
    int32_t label = 0;
    PSTRAIN_RETURN_IF_ERROR(
        device_->CopyToHost(labels + row, sizeof(label), &label));
    if (binary) {
      return absl::InvalidArgumentError(absl::StrCat(
          loss, ": label ", label, " of example ", row,
          " is not 0 or 1 (binary cross-entropy takes labels 0 and 1)"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(loss, ": label ", label, " of example ", row,
                     " is outside [0, ", classes, ")"));
  }
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) total += host_rows_[i];
  return total;
}

absl::StatusOr<double> Losses::SparseSoftmaxCrossEntropyFromLogits(
    const float* logits, const int32_t* labels, int64_t batch, int64_t classes,
    float* dlogits) {
  constexpr char kLoss[] = "SparseSoftmaxCrossEntropyFromLogits";
  PSTRAIN_RETURN_IF_ERROR(CheckArgs(kLoss, logits, labels, batch, classes));
  PSTRAIN_RETURN_IF_ERROR(ResetBadRow(kLoss));
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchSoftmaxCrossEntropy(
          logits, labels, batch, classes, dlogits, row_out_.as<double>(),
          bad_row_.as<unsigned long long>(), device_->stream()),
      kLoss));
  return Finish(kLoss, labels, batch, classes);
}

absl::StatusOr<double> Losses::SparseCrossEntropyFromProbabilities(
    const float* probs, const int32_t* labels, int64_t batch, int64_t classes,
    float* dprobs) {
  constexpr char kLoss[] = "SparseCrossEntropyFromProbabilities";
  PSTRAIN_RETURN_IF_ERROR(CheckArgs(kLoss, probs, labels, batch, classes));
  PSTRAIN_RETURN_IF_ERROR(ResetBadRow(kLoss));
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchCrossEntropyFromProbabilities(probs, labels, batch, classes, kLow,
                                          kHigh, dprobs, row_out_.as<double>(),
                                          bad_row_.as<unsigned long long>(),
                                          device_->stream()),
      kLoss));
  return Finish(kLoss, labels, batch, classes);
}

absl::StatusOr<double> Losses::MeanSquaredErrorSum(const float* predictions,
                                                   const float* targets,
                                                   int64_t batch,
                                                   int64_t outputs,
                                                   float* dpredictions) {
  constexpr char kLoss[] = "MeanSquaredErrorSum";
  PSTRAIN_RETURN_IF_ERROR(
      CheckArgs(kLoss, predictions, targets, batch, outputs));
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchSquaredError(predictions, targets, batch, outputs, dpredictions,
                         row_out_.as<double>(), device_->stream()),
      kLoss));
  PSTRAIN_ASSIGN_OR_RETURN(const double total,
                           Finish(kLoss, nullptr, batch, outputs));
  return total / outputs;
}

absl::StatusOr<int64_t> Losses::CountCorrect(const float* scores,
                                             const int32_t* labels,
                                             int64_t batch, int64_t classes) {
  constexpr char kLoss[] = "CountCorrect";
  PSTRAIN_RETURN_IF_ERROR(CheckArgs(kLoss, scores, labels, batch, classes));
  PSTRAIN_RETURN_IF_ERROR(ResetBadRow(kLoss));
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchCountCorrect(scores, labels, batch, classes, row_out_.as<double>(),
                         bad_row_.as<unsigned long long>(), device_->stream()),
      kLoss));
  PSTRAIN_ASSIGN_OR_RETURN(const double correct,
                           Finish(kLoss, labels, batch, classes));
  return static_cast<int64_t>(correct);
}

absl::StatusOr<double> Losses::SoftmaxCrossEntropyFromLogits(
    const float* logits, const float* targets, int64_t batch, int64_t classes,
    float* dlogits) {
  constexpr char kLoss[] = "SoftmaxCrossEntropyFromLogits";
  PSTRAIN_RETURN_IF_ERROR(CheckArgs(kLoss, logits, targets, batch, classes));
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchCategoricalCrossEntropyFromLogits(logits, targets, batch, classes,
                                              dlogits, row_out_.as<double>(),
                                              device_->stream()),
      kLoss));
  return Finish(kLoss, nullptr, batch, classes);
}

absl::StatusOr<double> Losses::CategoricalCrossEntropyFromProbabilities(
    const float* probs, const float* targets, int64_t batch, int64_t classes,
    float* dprobs) {
  constexpr char kLoss[] = "CategoricalCrossEntropyFromProbabilities";
  PSTRAIN_RETURN_IF_ERROR(CheckArgs(kLoss, probs, targets, batch, classes));
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(LaunchCategoricalCrossEntropyFromProbabilities(
                     probs, targets, batch, classes, kLow, kHigh, dprobs,
                     row_out_.as<double>(), device_->stream()),
                 kLoss));
  return Finish(kLoss, nullptr, batch, classes);
}

absl::StatusOr<double> Losses::SigmoidCrossEntropyFromLogits(
    const float* logits, const int32_t* labels, int64_t batch, float* dlogits) {
  constexpr char kLoss[] = "SigmoidCrossEntropyFromLogits";
  PSTRAIN_RETURN_IF_ERROR(CheckArgs(kLoss, logits, labels, batch, 1));
  PSTRAIN_RETURN_IF_ERROR(ResetBadRow(kLoss));
  PSTRAIN_RETURN_IF_ERROR(
      CudaStatus(LaunchSigmoidCrossEntropy(
                     logits, labels, batch, dlogits, row_out_.as<double>(),
                     bad_row_.as<unsigned long long>(), device_->stream()),
                 kLoss));
  return Finish(kLoss, labels, batch, 2, /*binary=*/true);
}

absl::StatusOr<double> Losses::BinaryCrossEntropyFromProbabilities(
    const float* probs, const int32_t* labels, int64_t batch, float* dprobs) {
  constexpr char kLoss[] = "BinaryCrossEntropyFromProbabilities";
  PSTRAIN_RETURN_IF_ERROR(CheckArgs(kLoss, probs, labels, batch, 1));
  PSTRAIN_RETURN_IF_ERROR(ResetBadRow(kLoss));
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchBinaryCrossEntropyFromProbabilities(
          probs, labels, batch, kLow, kHigh, dprobs, row_out_.as<double>(),
          bad_row_.as<unsigned long long>(), device_->stream()),
      kLoss));
  return Finish(kLoss, labels, batch, 2, /*binary=*/true);
}

absl::StatusOr<double> Losses::MeanAbsoluteErrorSum(const float* predictions,
                                                    const float* targets,
                                                    int64_t batch,
                                                    int64_t outputs,
                                                    float* dpredictions) {
  constexpr char kLoss[] = "MeanAbsoluteErrorSum";
  PSTRAIN_RETURN_IF_ERROR(
      CheckArgs(kLoss, predictions, targets, batch, outputs));
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchAbsoluteError(predictions, targets, batch, outputs, dpredictions,
                          row_out_.as<double>(), device_->stream()),
      kLoss));
  PSTRAIN_ASSIGN_OR_RETURN(const double total,
                           Finish(kLoss, nullptr, batch, outputs));
  return total / outputs;
}

absl::StatusOr<double> Losses::HuberSum(const float* predictions,
                                        const float* targets, int64_t batch,
                                        int64_t outputs, float delta,
                                        float* dpredictions) {
  constexpr char kLoss[] = "HuberSum";
  PSTRAIN_RETURN_IF_ERROR(
      CheckArgs(kLoss, predictions, targets, batch, outputs));
  if (!(delta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kLoss, ": delta must be > 0, got ", delta));
  }
  PSTRAIN_RETURN_IF_ERROR(device_->MakeCurrent());
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchHuber(predictions, targets, batch, outputs, delta, dpredictions,
                  row_out_.as<double>(), device_->stream()),
      kLoss));
  PSTRAIN_ASSIGN_OR_RETURN(const double total,
                           Finish(kLoss, nullptr, batch, outputs));
  return total / outputs;
}

absl::StatusOr<int64_t> Losses::CountBinaryCorrect(const float* scores,
                                                   bool logits,
                                                   const int32_t* labels,
                                                   int64_t batch) {
  constexpr char kLoss[] = "CountBinaryCorrect";
  PSTRAIN_RETURN_IF_ERROR(CheckArgs(kLoss, scores, labels, batch, 1));
  PSTRAIN_RETURN_IF_ERROR(ResetBadRow(kLoss));
  PSTRAIN_RETURN_IF_ERROR(CudaStatus(
      LaunchCountBinaryCorrect(
          scores, logits ? 0.0f : 0.5f, labels, batch, row_out_.as<double>(),
          bad_row_.as<unsigned long long>(), device_->stream()),
      kLoss));
  PSTRAIN_ASSIGN_OR_RETURN(const double correct,
                           Finish(kLoss, labels, batch, 2, /*binary=*/true));
  return static_cast<int64_t>(correct);
}

}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

#include "compute/cpu/dropout.h"

#include <array>

#include "compute/cpu/philox.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

uint32_t Lo(uint64_t v) { return static_cast<uint32_t>(v); }
uint32_t Hi(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

}  // namespace

absl::StatusOr<std::unique_ptr<DropoutOp>> DropoutOp::Create(
    int64_t num_elements, float rate) {
  const absl::Status status = CheckArgs(num_elements, rate);
  if (!status.ok()) return status;
  return std::unique_ptr<DropoutOp>(new DropoutOp(num_elements, rate));
}

DropoutOp::DropoutOp(int64_t num_elements, float rate)
    : DropoutBase(num_elements, rate), mask_(num_elements) {}

absl::Status DropoutOp::RunForward(const float* x, const DropoutKey& key,
                                   float* y) {
  const std::array<uint32_t, 2> philox_key = {Lo(key.seed), Hi(key.seed)};
  std::array<uint32_t, 4> words{};
  for (int64_t i = 0; i < num_elements_; ++i) {
    const uint64_t e = key.offset + static_cast<uint64_t>(i);
    const uint64_t block = e / 4;
    const int lane = static_cast<int>(e % 4);
    if (i == 0 || lane == 0) {
      words = Philox4x32({Lo(block), Hi(block), Lo(key.step), Hi(key.step)},
                         philox_key);
    }
    const bool keep = words[lane] >= threshold_;
    mask_[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * scale_ : 0.0f;
  }
  return absl::OkStatus();
}

absl::Status DropoutOp::RunBackward(const float* dy, float* dx) {
  for (int64_t i = 0; i < num_elements_; ++i) {
    dx[i] = mask_[i] ? dy[i] * scale_ : 0.0f;
  }
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

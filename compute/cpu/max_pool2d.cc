#include "compute/cpu/max_pool2d.h"

#include "compute/cpu/pool_windows.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

constexpr char kOp[] = "MaxPool2D";

}  // namespace

absl::StatusOr<std::unique_ptr<MaxPool2DOp>> MaxPool2DOp::Create(
    const Pool2DShape& shape, Engine* engine) {
  absl::StatusOr<PoolWindows> windows = CheckPool2D(kOp, shape);
  if (!windows.ok()) return windows.status();
  std::unique_ptr<MaxPool2DOp> op(new MaxPool2DOp(
      kOp, shape, *windows, engine, dnnl::algorithm::pooling_max));
  const absl::Status status = op->Init();
  if (!status.ok()) return status;
  return op;
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

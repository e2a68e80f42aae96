#include "compute/cpu/layer_graph.h"

#include "compute/layer_graph_impl.h"

namespace pstrain {
namespace worker {
namespace cpu {

absl::StatusOr<Tensor> CpuGraphDevice::Allocate(Engine* /*engine*/,
                                                int64_t floats) {
  return Tensor::Create(DT_FLOAT, {floats});
}

}  // namespace cpu

template class LayerGraph<cpu::CpuGraphDevice>;

}  // namespace worker
}  // namespace pstrain

// The shape of a graph stage's layer op for one batch, from the stage's
// StagePlan (layer_plan.h), whose shapes are per example: what the CPU and
// the GPU graph stages (compute/cpu/graph_stage.h, compute/gpu/graph_stage.h)
// hand their ops' Create, so that both devices size an op alike.
//
//   Conv2DShape shape = StageConv2DShape(plan, batch);
//   shape.bf16 = engine->bf16();  // What only one device sets.
//   PSTRAIN_RETURN_IF_ERROR(TakeOp(plan.layer,
//                                  Conv2DOp::Create(shape, engine), &conv));
//
// REQUIRES: the plan's kind is the op's (StageKind::kConv2D for
// StageConv2DShape, and so on) and batch > 0.
#ifndef PSTRAIN_COMPUTE_STAGE_OP_SHAPES_H_
#define PSTRAIN_COMPUTE_STAGE_OP_SHAPES_H_

#include <cstdint>

#include "compute/cpu/op_shapes.h"
#include "compute/layer_plan.h"

namespace pstrain {
namespace worker {

cpu::Conv2DShape StageConv2DShape(const StagePlan& plan, int64_t batch);
// MaxPool2D's and AveragePooling2D's.
cpu::Pool2DShape StagePool2DShape(const StagePlan& plan, int64_t batch);
// The plan's rows (per example, the leading axes) times the batch.
cpu::DenseShape StageDenseShape(const StagePlan& plan, int64_t batch);
cpu::SoftmaxShape StageSoftmaxShape(const StagePlan& plan, int64_t batch);
cpu::EmbeddingShape StageEmbeddingShape(const StagePlan& plan, int64_t batch);
// Normalized over the last axis of the input; every other position a row.
cpu::BatchNormShape StageBatchNormShape(const StagePlan& plan, int64_t batch);
cpu::LayerNormShape StageLayerNormShape(const StagePlan& plan, int64_t batch);
// Inputs query, value and maybe key (default: the value), each
// [sequence, features].
cpu::AttentionShape StageAttentionShape(const StagePlan& plan, int64_t batch);

}  // namespace worker
}  // namespace pstrain

#endif  // PSTRAIN_COMPUTE_STAGE_OP_SHAPES_H_

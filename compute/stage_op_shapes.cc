#include "compute/stage_op_shapes.h"

#include <vector>

namespace pstrain {
namespace worker {

cpu::Conv2DShape StageConv2DShape(const StagePlan& p, int64_t batch) {
  cpu::Conv2DShape shape = p.conv;
  shape.batch = batch;
  return shape;
}

cpu::Pool2DShape StagePool2DShape(const StagePlan& p, int64_t batch) {
  cpu::Pool2DShape shape = p.pool;
  shape.batch = batch;
  return shape;
}

cpu::DenseShape StageDenseShape(const StagePlan& p, int64_t batch) {
  cpu::DenseShape shape = p.dense;
  shape.batch *= batch;  // Rows: the plan's are per example.
  return shape;
}

cpu::SoftmaxShape StageSoftmaxShape(const StagePlan& p, int64_t batch) {
  cpu::SoftmaxShape shape = p.softmax;
  shape.batch *= batch;
  return shape;
}

cpu::EmbeddingShape StageEmbeddingShape(const StagePlan& p, int64_t batch) {
  cpu::EmbeddingShape shape = p.embedding;
  shape.ids *= batch;
  return shape;
}

cpu::BatchNormShape StageBatchNormShape(const StagePlan& p, int64_t batch) {
  cpu::BatchNormShape shape;
  shape.channels = p.in_shapes[0].back();
  shape.rows = batch * (p.in_size / shape.channels);
  shape.epsilon = p.epsilon;
  shape.center = p.center;
  shape.scale = p.scale;
  return shape;
}

cpu::LayerNormShape StageLayerNormShape(const StagePlan& p, int64_t batch) {
  cpu::LayerNormShape shape;
  shape.width = p.in_shapes[0].back();
  shape.rows = batch * (p.in_size / shape.width);
  shape.epsilon = p.epsilon;
  shape.center = p.center;
  shape.scale = p.scale;
  return shape;
}

cpu::AttentionShape StageAttentionShape(const StagePlan& p, int64_t batch) {
  const std::vector<int64_t>& q = p.in_shapes[0];
  const std::vector<int64_t>& v = p.in_shapes[1];
  const std::vector<int64_t>& k = p.in_shapes.size() > 2 ? p.in_shapes[2] : v;
  cpu::AttentionShape shape;
  shape.batch = batch;
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
  return shape;
}

}  // namespace worker
}  // namespace pstrain

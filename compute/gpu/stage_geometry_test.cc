// The kernels' parameters of a stage, on the host (no GPU needed): the
// permutation geometry, read as graph_kernels.cu's Permute kernel reads it,
// moves every element where Keras's Permute puts it and its inverse brings
// it back; the average pool's padding is Keras's; every elementwise
// activation has its kernel and the others are refused.
#include "compute/gpu/stage_geometry.h"

#include <cstdint>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

// What LaunchPermute computes for one example: y[i] = x[from(i)].
std::vector<float> ApplyLikeTheKernel(const PermuteGeometry& g,
                                      const std::vector<float>& x) {
  std::vector<float> y(g.per_example);
  for (int64_t i = 0; i < g.per_example; ++i) {
    int64_t rest = i, from = 0;
    for (int a = g.rank - 1; a >= 0; --a) {
      from += (rest % g.out_dims[a]) * g.in_strides[a];
      rest /= g.out_dims[a];
    }
    y[i] = x[from];
  }
  return y;
}

TEST(StageGeometry, PermuteMovesEachElementWhereKerasPutsItAndBack) {
  const std::vector<int64_t> dims = {2, 3, 4};
  const std::vector<int> order = {2, 0, 1};  // Keras's Permute((3, 1, 2)).
  std::vector<float> x(24);
  std::iota(x.begin(), x.end(), 0.0f);
  const PermuteGeometry forward = TransposeGeometry(dims, order);
  EXPECT_EQ(forward.rank, 3);
  EXPECT_EQ(forward.per_example, 24);
  EXPECT_EQ(forward.out_dims[0], 4);
  EXPECT_EQ(forward.out_dims[1], 2);
  EXPECT_EQ(forward.out_dims[2], 3);
  const std::vector<float> y = ApplyLikeTheKernel(forward, x);
  // y[j0, j1, j2] = x[i] with i_{order[a]} = j_a: i = (j1, j2, j0).
  for (int j0 = 0; j0 < 4; ++j0) {
    for (int j1 = 0; j1 < 2; ++j1) {
      for (int j2 = 0; j2 < 3; ++j2) {
        EXPECT_EQ(y[(j0 * 2 + j1) * 3 + j2], x[(j1 * 3 + j2) * 4 + j0]);
      }
    }
  }
  EXPECT_EQ(ApplyLikeTheKernel(InverseTransposeGeometry(dims, order), y), x);
}

TEST(StageGeometry, AveragePoolingPadsAsKeras) {
  cpu::Pool2DShape shape;
  shape.height = 5;
  shape.width = 6;
  shape.channels = 2;
  shape.pool_h = 2;
  shape.pool_w = 3;
  shape.stride_h = 2;
  shape.stride_w = 1;
  shape.padding = cpu::Padding::kSame;
  absl::StatusOr<AvgPoolGeometry> g = AvgPoolGeometryOf(shape, 7);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->batch, 7);
  // Height: ceil(5 / 2) = 3 rows, total padding 1, all of it after.
  EXPECT_EQ(g->out_height, 3);
  EXPECT_EQ(g->pad_top, 0);
  // Width: 6 columns, total padding 2, one before.
  EXPECT_EQ(g->out_width, 6);
  EXPECT_EQ(g->pad_left, 1);
  shape.padding = cpu::Padding::kValid;
  shape.pool_h = 6;  // Larger than the input.
  EXPECT_EQ(AvgPoolGeometryOf(shape, 7).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StageGeometry, ZeroPaddingAddsEachSide) {
  const PadGeometry g = ZeroPaddingGeometry({3, 4, 2}, 1, 2, 0, 3);
  EXPECT_EQ(g.height, 3);
  EXPECT_EQ(g.width, 4);
  EXPECT_EQ(g.channels, 2);
  EXPECT_EQ(g.top, 1);
  EXPECT_EQ(g.left, 0);
  EXPECT_EQ(g.padded_height, 6);
  EXPECT_EQ(g.padded_width, 7);
}

TEST(StageGeometry, EveryElementwiseActivationHasAKernel) {
  cpu::ActivationShape shape;
  shape.params.max_value = 6;
  shape.params.negative_slope = 0.2f;
  shape.params.threshold = 0.5f;
  shape.params.alpha = 0.3f;
  for (const auto& [activation, kind] :
       std::vector<std::pair<Activation, PointwiseActivation>>{
           {Activation::kKerasRelu, PointwiseActivation::kKerasRelu},
           {Activation::kGelu, PointwiseActivation::kGelu},
           {Activation::kGeluTanh, PointwiseActivation::kGeluTanh},
           {Activation::kSigmoid, PointwiseActivation::kSigmoid},
           {Activation::kHardSigmoid, PointwiseActivation::kHardSigmoid},
           {Activation::kTanh, PointwiseActivation::kTanh},
           {Activation::kSilu, PointwiseActivation::kSilu},
           {Activation::kElu, PointwiseActivation::kElu},
           {Activation::kSelu, PointwiseActivation::kSelu},
           {Activation::kSoftplus, PointwiseActivation::kSoftplus}}) {
    shape.activation = activation;
    absl::StatusOr<PointwiseParams> p = PointwiseParamsOf(shape);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->kind, kind);
    EXPECT_EQ(p->max_value, 6);
    EXPECT_EQ(p->negative_slope, 0.2f);
    EXPECT_EQ(p->threshold, 0.5f);
    EXPECT_EQ(p->alpha, 0.3f);
  }
  for (const Activation a : {Activation::kLinear, Activation::kRelu,
                             Activation::kSoftmax, Activation::kLogSoftmax}) {
    shape.activation = a;
    EXPECT_EQ(PointwiseParamsOf(shape).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace gpu
}  // namespace worker
}  // namespace pstrain

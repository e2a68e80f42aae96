#include "compute/cpu/permute.h"

#include <vector>

#include "compute/cpu/test_util.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

std::unique_ptr<Engine> MakeEngine() {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create({});
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

std::vector<PermuteShape> Shapes() {
  return {{3, {5}, {1}},
          {2, {3, 4}, {2, 1}},
          {2, {3, 4}, {1, 2}},
          {2, {2, 3, 4}, {3, 1, 2}},
          {3, {2, 1, 4, 3}, {2, 4, 1, 3}},
          {1, {2, 3, 2, 3, 2}, {5, 3, 1, 4, 2}}};
}

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

// For each output element (row-major over [batch, out_dims]), the flat index
// of the input element it copies, by the definition in the header: output
// index j_a takes input axis dims[a] - 1.
std::vector<int64_t> SourceIndices(const PermuteShape& s) {
  const size_t k = s.in_dims.size();
  std::vector<int64_t> out_dims(k);
  for (size_t a = 0; a < k; ++a) out_dims[a] = s.in_dims[s.dims[a] - 1];
  const int64_t per_example = Product(s.in_dims);
  std::vector<int64_t> sources;
  std::vector<int64_t> out_index(k, 0), in_index(k);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t e = 0; e < per_example; ++e) {
      // out_index from e, row-major.
      int64_t rest = e;
      for (size_t a = k; a-- > 0;) {
        out_index[a] = rest % out_dims[a];
        rest /= out_dims[a];
      }
      for (size_t a = 0; a < k; ++a) in_index[s.dims[a] - 1] = out_index[a];
      int64_t flat = 0;
      for (size_t j = 0; j < k; ++j) flat = flat * s.in_dims[j] + in_index[j];
      sources.push_back(n * per_example + flat);
    }
  }
  return sources;
}

TEST(PermuteOp, ForwardAndBackwardMatchReference) {
  std::unique_ptr<Engine> engine = MakeEngine();
  for (const PermuteShape& s : Shapes()) {
    SCOPED_TRACE(testing::Message()
                 << "k " << s.in_dims.size() << " dims[0] " << s.dims[0]);
    absl::StatusOr<std::unique_ptr<PermuteOp>> permute =
        PermuteOp::Create(s, engine.get());
    ASSERT_TRUE(permute.ok()) << permute.status();
    for (size_t a = 0; a < s.dims.size(); ++a) {
      EXPECT_EQ((*permute)->out_dims()[a], s.in_dims[s.dims[a] - 1]);
    }
    const int64_t size = s.batch * Product(s.in_dims);
    std::vector<int64_t> sources = SourceIndices(s);
    ASSERT_EQ(static_cast<int64_t>(sources.size()), size);
    std::vector<float> x = RandomFloats(size, 1), dy = RandomFloats(size, 2);
    std::vector<float> y(size), dx(size);
    ASSERT_EQ((*permute)->Forward(x.data(), y.data()), absl::OkStatus());
    ASSERT_EQ((*permute)->Backward(dy.data(), dx.data()), absl::OkStatus());
    for (int64_t o = 0; o < size; ++o) {
      EXPECT_EQ(y[o], x[sources[o]]) << "output " << o;
      // The inverse permutation sends dy[o] back to where y[o] came from.
      EXPECT_EQ(dx[sources[o]], dy[o]) << "output " << o;
    }
  }
}

TEST(PermuteOp, BackwardUndoesForward) {
  std::unique_ptr<Engine> engine = MakeEngine();
  PermuteShape s = {4, {3, 5, 2}, {2, 3, 1}};
  absl::StatusOr<std::unique_ptr<PermuteOp>> permute =
      PermuteOp::Create(s, engine.get());
  ASSERT_TRUE(permute.ok()) << permute.status();
  const int64_t size = s.batch * Product(s.in_dims);
  std::vector<float> x = RandomFloats(size, 3), y(size), back(size);
  ASSERT_EQ((*permute)->Forward(x.data(), y.data()), absl::OkStatus());
  ASSERT_EQ((*permute)->Backward(y.data(), back.data()), absl::OkStatus());
  EXPECT_EQ(back, x);
}

TEST(PermuteOp, CreateRefusesBadShapes) {
  std::unique_ptr<Engine> engine = MakeEngine();
  auto message = [&](const PermuteShape& s) {
    absl::Status status = PermuteOp::Create(s, engine.get()).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    return std::string(status.message());
  };
  EXPECT_EQ(message({0, {3, 4}, {2, 1}}),
            "Permute: batch must be positive, got 0");
  EXPECT_EQ(message({2, {}, {}}),
            "Permute: needs 1 to 11 axes besides the batch, got 0");
  EXPECT_EQ(message({2,
                     std::vector<int64_t>(12, 1),
                     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}),
            "Permute: needs 1 to 11 axes besides the batch, got 12");
  EXPECT_EQ(message({2, {3, 0}, {2, 1}}),
            "Permute: in_dims[1] must be positive, got 0");
  EXPECT_EQ(message({2, {3, 4}, {1, 1}}),
            "Permute: dims must be a permutation of 1..2 (1-based, as Keras), "
            "got (1, 1)");
  EXPECT_EQ(message({2, {3, 4}, {0, 1}}),
            "Permute: dims must be a permutation of 1..2 (1-based, as Keras), "
            "got (0, 1)");
  EXPECT_EQ(message({2, {3, 4, 5}, {2, 1}}),
            "Permute: dims must be a permutation of 1..3 (1-based, as Keras), "
            "got (2, 1)");
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

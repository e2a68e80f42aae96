#include "ps/initializer.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace ps {
namespace {

VariableDef Def(std::vector<int64_t> dims) {
  VariableDef def;
  def.set_name("dense/kernel");
  def.set_dtype(DT_FLOAT);
  for (int64_t d : dims) def.mutable_shape()->add_dims(d);
  def.mutable_initializer()->set_seed(42);
  return def;
}

std::vector<float> Fill(const VariableDef& def, int64_t begin, int64_t rows) {
  int64_t width = 1;
  for (int i = 1; i < def.shape().dims_size(); ++i) width *= def.shape().dims(i);
  std::vector<float> out(rows * width, -99.0f);
  FillRows(def, begin, rows, out.data());
  return out;
}

TEST(Initializer, AnyRowRangeMatchesTheWholeVariable) {
  VariableDef def = Def({10, 3});
  def.mutable_initializer()->mutable_glorot_uniform();
  const std::vector<float> whole = Fill(def, 0, 10);
  const std::vector<float> part = Fill(def, 4, 3);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(part[i], whole[12 + i]);
  // Rows differ from one another and from another seed.
  EXPECT_NE(whole[0], whole[3]);
  def.mutable_initializer()->set_seed(43);
  EXPECT_NE(Fill(def, 0, 1)[0], whole[0]);
}

TEST(Initializer, GlorotUniformUsesKerasFans) {
  // A conv kernel [3, 3, 8, 16]: fan_in 72, fan_out 144, limit sqrt(6/216).
  VariableDef def = Def({3, 3, 8, 16});
  def.mutable_initializer()->mutable_glorot_uniform();
  const std::vector<float> v = Fill(def, 0, 3);
  const double limit = std::sqrt(6.0 / 216.0);
  double max_abs = 0;
  for (float x : v) max_abs = std::max(max_abs, std::fabs(double{x}));
  EXPECT_LE(max_abs, limit);
  EXPECT_GT(max_abs, 0.9 * limit);  // 1152 draws reach near the bound
}

TEST(Initializer, RandomUniformStaysInRangeWithTheRightMean) {
  VariableDef def = Def({1000, 8});
  def.mutable_initializer()->mutable_random_uniform()->set_minval(-0.05f);
  def.mutable_initializer()->mutable_random_uniform()->set_maxval(0.05f);
  const std::vector<float> v = Fill(def, 0, 1000);
  double sum = 0;
  for (float x : v) {
    ASSERT_GE(x, -0.05f);
    ASSERT_LE(x, 0.05f);
    sum += x;
  }
  EXPECT_NEAR(sum / v.size(), 0.0, 0.002);
}

TEST(Initializer, TruncatedNormalIsWithinTwoStddevs) {
  VariableDef def = Def({500, 10});
  def.mutable_initializer()->mutable_truncated_normal()->set_mean(1.0f);
  def.mutable_initializer()->mutable_truncated_normal()->set_stddev(0.5f);
  const std::vector<float> v = Fill(def, 0, 500);
  double sum = 0;
  for (float x : v) {
    ASSERT_GE(x, 0.0f - 1e-6f);
    ASSERT_LE(x, 2.0f + 1e-6f);
    sum += x;
  }
  EXPECT_NEAR(sum / v.size(), 1.0, 0.02);
}

TEST(Initializer, ZerosAndConstant) {
  VariableDef def = Def({4});
  def.mutable_initializer()->mutable_zeros();
  EXPECT_EQ(Fill(def, 0, 4), std::vector<float>(4, 0.0f));
  def.mutable_initializer()->mutable_constant()->set_value(0.5f);
  EXPECT_EQ(Fill(def, 1, 2), std::vector<float>(2, 0.5f));
}

TEST(Initializer, CheckRefusesBadParameters) {
  VariableDef def = Def({4});
  EXPECT_EQ(CheckInitializer(def).message(),
            "variable 'dense/kernel': initializer has no kind set");
  def.mutable_initializer()->mutable_random_uniform()->set_minval(1);
  def.mutable_initializer()->mutable_random_uniform()->set_maxval(1);
  EXPECT_EQ(CheckInitializer(def).message(),
            "variable 'dense/kernel': initializer random_uniform [1, 1) is "
            "not a finite range");
  def.mutable_initializer()->mutable_truncated_normal()->set_stddev(0);
  EXPECT_EQ(CheckInitializer(def).code(), absl::StatusCode::kInvalidArgument);
  def.mutable_initializer()->mutable_constant()->set_value(NAN);
  EXPECT_EQ(CheckInitializer(def).code(), absl::StatusCode::kInvalidArgument);
  def.mutable_initializer()->mutable_glorot_uniform();
  EXPECT_TRUE(CheckInitializer(def).ok());
}

}  // namespace
}  // namespace ps
}  // namespace pstrain

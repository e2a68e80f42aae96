#include "ps/initializer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
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

// Sample statistics of a variable's values.
struct Stats {
  double n = 0;
  double mean = 0;
  double variance = 0;  // about the sample mean
  double max_abs = 0;
};

Stats StatsOf(const std::vector<float>& v) {
  Stats s;
  s.n = v.size();
  for (float x : v) s.mean += x;
  s.mean /= s.n;
  for (float x : v) {
    s.variance += (x - s.mean) * (x - s.mean);
    s.max_abs = std::max(s.max_abs, std::fabs(double{x}));
  }
  s.variance /= s.n;
  return s;
}

// Fraction of values farther than `bound` from `center`.
double FractionBeyond(const std::vector<float>& v, double center,
                      double bound) {
  double count = 0;
  for (float x : v) count += std::fabs(x - center) > bound ? 1 : 0;
  return count / v.size();
}

// Expects the sample mean and variance of `v` to match a distribution of mean
// `mean` and standard deviation `stddev`, within 5 standard errors: the
// sample mean's is stddev / sqrt(n); the sample variance's is at most
// stddev^2 * sqrt(2 / n) for the distributions tested here (a normal's; a
// truncated normal and a uniform have lighter tails).
void ExpectMoments(const std::vector<float>& v, double mean, double stddev) {
  const Stats s = StatsOf(v);
  EXPECT_NEAR(s.mean, mean, 5 * stddev / std::sqrt(s.n));
  EXPECT_NEAR(s.variance, stddev * stddev,
              5 * stddev * stddev * std::sqrt(2 / s.n));
}

// Expects FillRows over rows [begin, begin + rows) to equal those rows of the
// whole variable, bit for bit.
void ExpectSliceMatchesWhole(const VariableDef& def, int64_t begin,
                             int64_t rows) {
  const std::vector<float> whole = Fill(def, 0, def.shape().dims(0));
  const std::vector<float> part = Fill(def, begin, rows);
  const int64_t width = part.size() / rows;
  for (size_t i = 0; i < part.size(); ++i) {
    ASSERT_EQ(part[i], whole[begin * width + i]) << "element " << i;
  }
}

VariableDef VarianceScaling(std::vector<int64_t> dims, float scale,
                            Initializer::VarianceScaling::Mode mode,
                            Initializer::VarianceScaling::Distribution dist) {
  VariableDef def = Def(std::move(dims));
  auto* v = def.mutable_initializer()->mutable_variance_scaling();
  v->set_scale(scale);
  v->set_mode(mode);
  v->set_distribution(dist);
  return def;
}

TEST(Initializer, VarianceScalingTruncatedNormalHasStddevSqrtScaleOverN) {
  // fan_in 400: stddev sqrt(2 / 400) after truncation, drawn with
  // sqrt(2 / 400) / 0.8796... and cut at twice that.
  const VariableDef def =
      VarianceScaling({400, 250}, 2.0f, Initializer::VarianceScaling::FAN_IN,
                      Initializer::VarianceScaling::TRUNCATED_NORMAL);
  const std::vector<float> v = Fill(def, 0, 400);
  const double stddev = std::sqrt(2.0 / 400);
  ExpectMoments(v, 0.0, stddev);
  const double bound = 2 * stddev / 0.87962566103423978;
  const Stats s = StatsOf(v);
  EXPECT_LE(s.max_abs, bound * (1 + 1e-6));
  EXPECT_GT(s.max_abs, 0.99 * bound);  // 100k draws reach near the bound
}

TEST(Initializer, VarianceScalingUntruncatedNormalHasTails) {
  const VariableDef def =
      VarianceScaling({400, 250}, 0.5f, Initializer::VarianceScaling::FAN_OUT,
                      Initializer::VarianceScaling::UNTRUNCATED_NORMAL);
  const std::vector<float> v = Fill(def, 0, 400);
  const double stddev = std::sqrt(0.5 / 250);
  ExpectMoments(v, 0.0, stddev);
  // P(|z| > 2) = 0.0455 for a normal; 0 had it been truncated.
  const double p = 0.04550026;
  EXPECT_NEAR(FractionBeyond(v, 0.0, 2 * stddev), p,
              5 * std::sqrt(p * (1 - p) / v.size()));
}

TEST(Initializer, VarianceScalingUniformStaysWithinTheLimit) {
  // A conv kernel [5, 5, 20, 40]: fan_in 500, fan_out 1000, fan_avg 750.
  const VariableDef def = VarianceScaling(
      {5, 5, 20, 40}, 3.0f, Initializer::VarianceScaling::FAN_AVG,
      Initializer::VarianceScaling::UNIFORM);
  const std::vector<float> v = Fill(def, 0, 5);
  const double limit = std::sqrt(3.0 * 3.0 / 750);
  ExpectMoments(v, 0.0, limit / std::sqrt(3.0));
  const Stats s = StatsOf(v);
  EXPECT_LE(s.max_abs, limit);
  EXPECT_GT(s.max_abs, 0.999 * limit);
}

TEST(Initializer, VarianceScalingModesPickTheirFan) {
  // [5, 5, 20, 40]: n = 500, 1000, 750 for fan_in, fan_out, fan_avg.
  const std::pair<Initializer::VarianceScaling::Mode, double> modes[] = {
      {Initializer::VarianceScaling::FAN_IN, 500},
      {Initializer::VarianceScaling::FAN_OUT, 1000},
      {Initializer::VarianceScaling::FAN_AVG, 750}};
  for (const auto& [mode, n] : modes) {
    SCOPED_TRACE(Initializer::VarianceScaling::Mode_Name(mode));
    const VariableDef def =
        VarianceScaling({5, 5, 20, 40}, 1.0f, mode,
                        Initializer::VarianceScaling::UNTRUNCATED_NORMAL);
    ExpectMoments(Fill(def, 0, 5), 0.0, std::sqrt(1.0 / n));
  }
}

TEST(Initializer, VarianceScalingGlorotUniformEqualsGlorotUniform) {
  // TF.js writes glorotUniform as VarianceScaling(1, fan_avg, uniform).
  VariableDef glorot = Def({3, 3, 8, 16});
  glorot.mutable_initializer()->mutable_glorot_uniform();
  const VariableDef scaling = VarianceScaling(
      {3, 3, 8, 16}, 1.0f, Initializer::VarianceScaling::FAN_AVG,
      Initializer::VarianceScaling::UNIFORM);
  const std::vector<float> a = Fill(glorot, 0, 3);
  const std::vector<float> b = Fill(scaling, 0, 3);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(a[i], b[i]);
}

TEST(Initializer, RandomNormalHasItsMeanAndStddev) {
  VariableDef def = Def({500, 200});
  def.mutable_initializer()->mutable_random_normal()->set_mean(1.0f);
  def.mutable_initializer()->mutable_random_normal()->set_stddev(0.2f);
  const std::vector<float> v = Fill(def, 0, 500);
  ExpectMoments(v, 1.0, 0.2);
  const double p = 0.04550026;
  EXPECT_NEAR(FractionBeyond(v, 1.0, 0.4), p,
              5 * std::sqrt(p * (1 - p) / v.size()));
}

// The product of the [rows, cols] matrix `w` (row-major) with its transpose:
// w^T w (cols x cols) when `columns`, else w w^T (rows x rows).
std::vector<double> Gram(const std::vector<float>& w, int64_t rows,
                         int64_t cols, bool columns) {
  const int64_t n = columns ? cols : rows;
  std::vector<double> g(n * n, 0.0);
  for (int64_t a = 0; a < n; ++a) {
    for (int64_t b = 0; b < n; ++b) {
      double dot = 0;
      const int64_t k_end = columns ? rows : cols;
      for (int64_t k = 0; k < k_end; ++k) {
        dot += columns ? double{w[k * cols + a]} * w[k * cols + b]
                       : double{w[a * cols + k]} * w[b * cols + k];
      }
      g[a * n + b] = dot;
    }
  }
  return g;
}

void ExpectScaledIdentity(const std::vector<double>& g, int64_t n,
                          double value) {
  for (int64_t a = 0; a < n; ++a) {
    for (int64_t b = 0; b < n; ++b) {
      ASSERT_NEAR(g[a * n + b], a == b ? value : 0.0, 1e-4)
          << "(" << a << ", " << b << ")";
    }
  }
}

TEST(Initializer, OrthogonalHasOrthonormalColumnsTimesGain) {
  // [64, 16]: rows >= cols, so W^T W = gain^2 I.
  VariableDef def = Def({64, 16});
  def.mutable_initializer()->mutable_orthogonal()->set_gain(2.0f);
  ExpectScaledIdentity(Gram(Fill(def, 0, 64), 64, 16, true), 16, 4.0);
  // A conv kernel [3, 3, 4, 8] is a [36, 8] matrix.
  VariableDef conv = Def({3, 3, 4, 8});
  conv.mutable_initializer()->mutable_orthogonal()->set_gain(1.0f);
  ExpectScaledIdentity(Gram(Fill(conv, 0, 3), 36, 8, true), 8, 1.0);
  // Square.
  VariableDef square = Def({32, 32});
  square.mutable_initializer()->mutable_orthogonal()->set_gain(0.5f);
  const std::vector<float> w = Fill(square, 0, 32);
  ExpectScaledIdentity(Gram(w, 32, 32, true), 32, 0.25);
  ExpectScaledIdentity(Gram(w, 32, 32, false), 32, 0.25);
}

TEST(Initializer, OrthogonalWithFewerRowsHasOrthonormalRows) {
  // [16, 64]: the transpose of a [64, 16] Q, so W W^T = gain^2 I.
  VariableDef def = Def({16, 64});
  def.mutable_initializer()->mutable_orthogonal()->set_gain(1.5f);
  ExpectScaledIdentity(Gram(Fill(def, 0, 16), 16, 64, false), 16, 2.25);
}

// Keras's Orthogonal is the Q of A = Q R with R's diagonal made positive, A a
// standard normal [max, min] matrix. pstrain draws A's row i from row i's
// stream, as a RandomNormal(0, 1) variable of shape [max, min] with the same
// seed draws its row i: Q^T A must then be R, upper triangular with a
// positive diagonal (up to A's rounding to float here).
void ExpectQTransposeAIsUpperTriangular(int64_t rows, int64_t cols) {
  SCOPED_TRACE(testing::Message() << rows << " x " << cols);
  const int64_t m = std::max(rows, cols), n = std::min(rows, cols);
  VariableDef orthogonal = Def({rows, cols});
  orthogonal.mutable_initializer()->mutable_orthogonal()->set_gain(1.0f);
  const std::vector<float> w = Fill(orthogonal, 0, rows);
  VariableDef normal = Def({m, n});
  normal.mutable_initializer()->mutable_random_normal()->set_stddev(1.0f);
  const std::vector<float> a = Fill(normal, 0, m);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      // (Q^T A)[i][j] with Q = W when rows >= cols, else W^T.
      double r = 0;
      for (int64_t k = 0; k < m; ++k) {
        const double q = rows >= cols ? w[k * cols + i] : w[i * cols + k];
        r += q * a[k * n + j];
      }
      if (i > j) {
        EXPECT_NEAR(r, 0.0, 1e-4) << "(" << i << ", " << j << ")";
      } else if (i == j) {
        EXPECT_GT(r, 0.1) << "(" << i << ", " << i << ")";
      }
    }
  }
}

TEST(Initializer, OrthogonalIsTheQOfAPositiveDiagonalQR) {
  ExpectQTransposeAIsUpperTriangular(40, 12);
  ExpectQTransposeAIsUpperTriangular(12, 40);
}

TEST(Initializer, IdentityPutsGainOnTheDiagonal) {
  VariableDef def = Def({3, 5});
  def.mutable_initializer()->mutable_identity()->set_gain(2.5f);
  EXPECT_EQ(Fill(def, 0, 3), (std::vector<float>{2.5f, 0, 0, 0, 0,  //
                                                 0, 2.5f, 0, 0, 0,  //
                                                 0, 0, 2.5f, 0, 0}));
  def.mutable_shape()->set_dims(0, 5);
  def.mutable_shape()->set_dims(1, 3);
  EXPECT_EQ(Fill(def, 0, 5), (std::vector<float>{2.5f, 0, 0,  //
                                                 0, 2.5f, 0,  //
                                                 0, 0, 2.5f,  //
                                                 0, 0, 0,     //
                                                 0, 0, 0}));
  EXPECT_EQ(Fill(def, 1, 2), (std::vector<float>{0, 2.5f, 0, 0, 0, 2.5f}));
}

TEST(Initializer, NewKindsGiveAnySliceTheWholeVariablesRows) {
  std::vector<VariableDef> defs;
  for (const auto dist : {Initializer::VarianceScaling::TRUNCATED_NORMAL,
                          Initializer::VarianceScaling::UNTRUNCATED_NORMAL,
                          Initializer::VarianceScaling::UNIFORM}) {
    defs.push_back(VarianceScaling({30, 7}, 2.0f,
                                   Initializer::VarianceScaling::FAN_IN, dist));
  }
  defs.push_back(Def({30, 7}));
  defs.back().mutable_initializer()->mutable_random_normal()->set_stddev(1);
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{30, 7}, {7, 30}, {6, 5, 2, 4}}) {
    defs.push_back(Def(dims));
    defs.back().mutable_initializer()->mutable_orthogonal()->set_gain(1);
  }
  defs.push_back(Def({30, 7}));
  defs.back().mutable_initializer()->mutable_identity()->set_gain(1);
  for (const VariableDef& def : defs) {
    SCOPED_TRACE(def.ShortDebugString());
    ASSERT_TRUE(CheckInitializer(def).ok()) << CheckInitializer(def);
    const int64_t rows = def.shape().dims(0);
    ExpectSliceMatchesWhole(def, 0, rows);
    ExpectSliceMatchesWhole(def, 2, 3);
    ExpectSliceMatchesWhole(def, rows - 1, 1);
  }
  // A different seed, different values.
  VariableDef reseeded = defs[0];
  reseeded.mutable_initializer()->set_seed(43);
  EXPECT_NE(Fill(reseeded, 0, 1), Fill(defs[0], 0, 1));
  reseeded = defs[4];
  reseeded.mutable_initializer()->set_seed(43);
  EXPECT_NE(Fill(reseeded, 0, 1), Fill(defs[4], 0, 1));
}

TEST(Initializer, CheckRefusesBadNewKinds) {
  const std::string at = "variable 'dense/kernel': initializer ";
  VariableDef def =
      VarianceScaling({4, 4}, 0.0f, Initializer::VarianceScaling::FAN_IN,
                      Initializer::VarianceScaling::UNIFORM);
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "variance_scaling scale 0 must be finite and > 0");
  auto* scaling = def.mutable_initializer()->mutable_variance_scaling();
  scaling->set_scale(std::numeric_limits<float>::infinity());
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "variance_scaling scale inf must be finite and > 0");
  scaling->set_scale(1);
  EXPECT_TRUE(CheckInitializer(def).ok());
  scaling->set_mode(Initializer::VarianceScaling::MODE_UNSPECIFIED);
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "variance_scaling mode 0 is not FAN_IN, FAN_OUT or FAN_AVG");
  scaling->set_mode(static_cast<Initializer::VarianceScaling::Mode>(9));
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "variance_scaling mode 9 is not FAN_IN, FAN_OUT or FAN_AVG");
  scaling->set_mode(Initializer::VarianceScaling::FAN_AVG);
  scaling->clear_distribution();
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "variance_scaling distribution 0 is not TRUNCATED_NORMAL, "
                 "UNTRUNCATED_NORMAL or UNIFORM");

  auto* normal = def.mutable_initializer()->mutable_random_normal();
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "random_normal stddev 0 must be finite and > 0");
  normal->set_stddev(-1);
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "random_normal stddev -1 must be finite and > 0");
  normal->set_stddev(1);
  normal->set_mean(NAN);
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "random_normal mean nan is not finite");
  normal->set_mean(-3);
  EXPECT_TRUE(CheckInitializer(def).ok());

  def.mutable_initializer()->mutable_orthogonal()->set_gain(INFINITY);
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "orthogonal gain inf is not finite");
  def.mutable_initializer()->mutable_orthogonal()->set_gain(-1);
  EXPECT_TRUE(CheckInitializer(def).ok());
  def.set_sparse(true);
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "orthogonal is not supported for a sparse (embedding) "
                 "variable");
  def.set_sparse(false);
  def.mutable_shape()->clear_dims();
  def.mutable_shape()->add_dims(4);
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "orthogonal needs a variable of rank >= 2, got rank 1");

  def.mutable_initializer()->mutable_identity()->set_gain(NAN);
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "identity gain nan is not finite");
  def.mutable_initializer()->mutable_identity()->set_gain(1);
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "identity needs a variable of rank 2, got rank 1");
  def.mutable_shape()->add_dims(3);
  EXPECT_TRUE(CheckInitializer(def).ok());
  def.mutable_shape()->add_dims(2);
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "identity needs a variable of rank 2, got rank 3");
  def.mutable_shape()->mutable_dims()->RemoveLast();
  def.set_sparse(true);
  EXPECT_EQ(CheckInitializer(def).message(),
            at + "identity is not supported for a sparse (embedding) "
                 "variable");
}

}  // namespace
}  // namespace ps
}  // namespace pstrain

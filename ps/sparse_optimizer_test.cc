// The optimizers for embedding rows (--embedding_optimizer): TensorFlow's
// Adagrad (epsilon outside the square root), TensorFlow's FTRL and lazy
// Adam, checked two ways: against their published update rules written here
// by hand for a step or two, and against reference numbers made by
// ps/testdata/make_sparse_optimizer_refs.py (PyTorch 1.13's Adagrad and
// SparseAdam; FTRL, which PyTorch lacks, in NumPy float64) for a table whose
// rows are touched irregularly over six updates.
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "proto/training.pb.h"
#include "ps/optimizer.h"

namespace pstrain {
namespace ps {
namespace {

constexpr char kRefs[] = "ps/testdata/sparse_optimizer_refs.txt";
constexpr int kRows = 4;
constexpr int kWidth = 3;
constexpr int kSteps = 6;
constexpr double kLr = 0.1;

// As TOUCHED in the script: the rows update t touches.
const std::map<int, std::vector<int>>& Touched() {
  static const auto* touched = new std::map<int, std::vector<int>>{
      {1, {0, 1, 2, 3}}, {2, {0, 2}},    {3, {1}},
      {4, {0, 2, 3}},    {5, {2}},       {6, {0, 1}}};
  return *touched;
}

float Initial(int r, int j) { return static_cast<float>(0.5 - 0.3 * r + 0.2 * j); }

float Gradient(int t, int r, int j) {
  return static_cast<float>(std::sin(0.9 * j + 1.3 * r + 1.7 * t) *
                            (1 + 0.3 * j));
}

// refs[case][array]: kRows * kWidth values.
using Refs = std::map<std::string, std::map<std::string, std::vector<double>>>;

Refs ReadRefs() {
  Refs refs;
  std::ifstream in(kRefs);
  EXPECT_TRUE(in.is_open()) << kRefs;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name, array;
    fields >> name >> array;
    std::vector<double>& values = refs[name][array];
    double v;
    while (fields >> v) values.push_back(v);
    EXPECT_EQ(values.size(), static_cast<size_t>(kRows * kWidth)) << line;
  }
  return refs;
}

std::unique_ptr<Optimizer> MustCreate(const OptimizerConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return opt.ok() ? *std::move(opt) : nullptr;
}

// A table as EmbeddingTable applies its optimizer: one Apply per touched
// row, with that row's slots; t is the table's update count.
struct Table {
  std::vector<float> w;
  std::vector<std::vector<float>> slots;
};

Table RunSchedule(const Optimizer& opt) {
  Table table;
  for (int r = 0; r < kRows; ++r) {
    for (int j = 0; j < kWidth; ++j) table.w.push_back(Initial(r, j));
  }
  for (int s = 0; s < opt.NumSlots(); ++s) {
    table.slots.emplace_back(kRows * kWidth, opt.SlotInitialValue(s));
  }
  for (int t = 1; t <= kSteps; ++t) {
    for (int r : Touched().at(t)) {
      std::vector<float> g(kWidth);
      for (int j = 0; j < kWidth; ++j) g[j] = Gradient(t, r, j);
      std::vector<float*> slots;
      for (auto& slot : table.slots) slots.push_back(slot.data() + r * kWidth);
      opt.Apply(absl::MakeSpan(table.w.data() + r * kWidth, kWidth), g, slots,
                t);
    }
  }
  return table;
}

void ExpectMatches(const std::vector<float>& got,
                   const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 2e-6 * (1 + std::fabs(want[i])))
        << what << "[" << i << "]";
  }
}

// Every array of `name` in the references against the run's.
void ExpectMatchesRefs(const OptimizerConfig& config, const std::string& name) {
  const Refs refs = ReadRefs();
  ASSERT_TRUE(refs.count(name)) << name << " missing from " << kRefs;
  std::unique_ptr<Optimizer> opt = MustCreate(config);
  ASSERT_NE(opt, nullptr);
  const Table table = RunSchedule(*opt);
  const auto& arrays = refs.at(name);
  ASSERT_EQ(arrays.size(), static_cast<size_t>(1 + opt->NumSlots()));
  ExpectMatches(table.w, arrays.at("w"), name + " w");
  for (int s = 0; s < opt->NumSlots(); ++s) {
    ASSERT_TRUE(arrays.count(opt->SlotName(s))) << opt->SlotName(s);
    ExpectMatches(table.slots[s], arrays.at(opt->SlotName(s)),
                  name + " " + opt->SlotName(s));
  }
}

OptimizerConfig TfAdagrad() {
  OptimizerConfig config;
  config.set_learning_rate(kLr);
  config.mutable_adagrad()->set_initial_accumulator_value(0.1f);
  config.mutable_adagrad()->set_epsilon(1e-7f);
  config.mutable_adagrad()->set_epsilon_outside_sqrt(true);
  return config;
}

OptimizerConfig LazyAdamConfig() {
  OptimizerConfig config;
  config.set_learning_rate(kLr);
  config.mutable_lazy_adam()->set_beta_1(0.9f);
  config.mutable_lazy_adam()->set_beta_2(0.999f);
  config.mutable_lazy_adam()->set_epsilon(1e-7f);
  return config;
}

OptimizerConfig FtrlConfig(float power) {
  OptimizerConfig config;
  config.set_learning_rate(kLr);
  OptimizerConfig::Ftrl* ftrl = config.mutable_ftrl();
  ftrl->set_learning_rate_power(power);
  ftrl->set_initial_accumulator_value(0.1f);
  ftrl->set_l1_regularization_strength(0.01f);
  ftrl->set_l2_regularization_strength(0.02f);
  ftrl->set_l2_shrinkage_regularization_strength(0.03f);
  ftrl->set_beta(0.5f);
  return config;
}

TEST(SparseOptimizer, AdagradMatchesPyTorchAdagrad) {
  ExpectMatchesRefs(TfAdagrad(), "adagrad");
}

TEST(SparseOptimizer, LazyAdamMatchesPyTorchSparseAdamPerRow) {
  ExpectMatchesRefs(LazyAdamConfig(), "lazy_adam");
}

TEST(SparseOptimizer, FtrlMatchesTensorFlowsFormula) {
  ExpectMatchesRefs(FtrlConfig(-0.5f), "ftrl");
  ExpectMatchesRefs(FtrlConfig(-0.7f), "ftrl_p07");
}

// Two steps of one element by the published rule: a += g^2;
// w -= lr * g / (sqrt(a) + eps) (TensorFlow), and the Keras 3 rule
// (eps inside the root) gives another number when eps is large.
TEST(SparseOptimizer, AdagradPutsEpsilonOutsideTheRoot) {
  OptimizerConfig config = TfAdagrad();
  config.mutable_adagrad()->set_epsilon(0.5f);
  std::unique_ptr<Optimizer> opt = MustCreate(config);
  ASSERT_NE(opt, nullptr);
  float w = 1.0f, a = 0.1f;
  float* slots[] = {&a};
  opt->Apply(absl::MakeSpan(&w, 1), {0.4f}, slots, 1);
  opt->Apply(absl::MakeSpan(&w, 1), {-0.2f}, slots, 2);
  double a_want = 0.1, w_want = 1.0;
  for (double g : {0.4, -0.2}) {
    a_want += g * g;
    w_want -= 0.1 * g / (std::sqrt(a_want) + 0.5);
  }
  EXPECT_NEAR(a, a_want, 1e-6);
  EXPECT_NEAR(w, w_want, 1e-6);
  config.mutable_adagrad()->set_epsilon_outside_sqrt(false);
  std::unique_ptr<Optimizer> keras = MustCreate(config);
  float w2 = 1.0f, a2 = 0.1f;
  float* slots2[] = {&a2};
  keras->Apply(absl::MakeSpan(&w2, 1), {0.4f}, slots2, 1);
  EXPECT_NEAR(w2, 1.0 - 0.1 * 0.4 / std::sqrt(0.1 + 0.16 + 0.5), 1e-6);
}

// FTRL without regularization is a per-coordinate adaptive step:
// w1 = -z / (sqrt(n1) / lr), z = g - (sqrt(n1) - sqrt(n0)) / lr * w0.
// With l1 above |z| the weight is exactly 0 (FTRL's sparsity).
TEST(SparseOptimizer, FtrlFollowsThePublishedRule) {
  OptimizerConfig config;
  config.set_learning_rate(0.5);
  config.mutable_ftrl()->set_learning_rate_power(-0.5f);
  config.mutable_ftrl()->set_initial_accumulator_value(0.25f);
  std::unique_ptr<Optimizer> opt = MustCreate(config);
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->SlotName(0), "accumulator");
  EXPECT_EQ(opt->SlotName(1), "linear");
  EXPECT_FLOAT_EQ(opt->SlotInitialValue(0), 0.25f);
  EXPECT_FLOAT_EQ(opt->SlotInitialValue(1), 0.0f);
  float w = 0.3f, n = 0.25f, z = 0.0f;
  float* slots[] = {&n, &z};
  opt->Apply(absl::MakeSpan(&w, 1), {0.6f}, slots, 1);
  const double n1 = 0.25 + 0.36;
  const double z1 = 0.6 - (std::sqrt(n1) - 0.5) / 0.5 * 0.3;
  EXPECT_NEAR(n, n1, 1e-6);
  EXPECT_NEAR(z, z1, 1e-6);
  EXPECT_NEAR(w, -z1 / (std::sqrt(n1) / 0.5), 1e-6);

  config.mutable_ftrl()->set_l1_regularization_strength(10.0f);
  std::unique_ptr<Optimizer> sparse = MustCreate(config);
  float w2 = 0.3f, n2 = 0.25f, z2 = 0.0f;
  float* slots2[] = {&n2, &z2};
  sparse->Apply(absl::MakeSpan(&w2, 1), {0.6f}, slots2, 1);
  EXPECT_EQ(w2, 0.0f);
}

// A row updated at table updates 1 and 5 has had two updates: its second
// uses Adam's bias correction for t = 2, not 5.
TEST(SparseOptimizer, LazyAdamCountsStepsPerRow) {
  std::unique_ptr<Optimizer> opt = MustCreate(LazyAdamConfig());
  ASSERT_NE(opt, nullptr);
  ASSERT_EQ(opt->NumSlots(), 3);
  EXPECT_EQ(opt->SlotName(2), "t");
  float w[2] = {1.0f, -1.0f}, m[2] = {0, 0}, v[2] = {0, 0}, t[2] = {0, 0};
  float* slots[] = {m, v, t};
  opt->Apply(absl::MakeSpan(w, 2), {0.5f, 0.25f}, slots, 1);
  opt->Apply(absl::MakeSpan(w, 2), {-0.3f, 0.1f}, slots, 5);
  EXPECT_EQ(t[0], 2.0f);
  EXPECT_EQ(t[1], 2.0f);
  const double g[2][2] = {{0.5, -0.3}, {0.25, 0.1}};
  const double start[2] = {1.0, -1.0};
  for (int i = 0; i < 2; ++i) {
    double mi = 0, vi = 0, wi = start[i];
    for (int step = 1; step <= 2; ++step) {
      const double gi = g[i][step - 1];
      mi = 0.9 * mi + 0.1 * gi;
      vi = 0.999 * vi + 0.001 * gi * gi;
      const double lr_t = kLr * std::sqrt(1 - std::pow(0.999, step)) /
                          (1 - std::pow(0.9, step));
      wi -= lr_t * mi / (std::sqrt(vi) + 1e-7);
    }
    EXPECT_NEAR(w[i], wi, 1e-6) << i;
    EXPECT_NEAR(m[i], mi, 1e-7) << i;
  }
}

void ExpectInvalid(const OptimizerConfig& config, const std::string& message) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config);
  ASSERT_FALSE(opt.ok()) << config.DebugString();
  EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(opt.status().message(), message);
}

TEST(SparseOptimizer, RefusesBadFtrlAndLazyAdamSettings) {
  OptimizerConfig config = FtrlConfig(0.5f);
  ExpectInvalid(config, "optimizer.ftrl.learning_rate_power: 0.5 must be <= 0");
  config = FtrlConfig(-0.5f);
  config.mutable_ftrl()->set_l1_regularization_strength(-1);
  ExpectInvalid(config,
                "optimizer.ftrl.l1_regularization_strength: -1 must be >= 0");
  config = FtrlConfig(-0.5f);
  config.mutable_ftrl()->set_beta(NAN);
  ExpectInvalid(config, "optimizer.ftrl.beta: nan must be finite");
  config = FtrlConfig(-0.5f);
  config.mutable_ftrl()->set_initial_accumulator_value(0);
  ExpectInvalid(config,
                "optimizer.ftrl.initial_accumulator_value: 0 must be > 0 when "
                "learning_rate_power < 0");
  config = FtrlConfig(0.0f);
  config.mutable_ftrl()->set_initial_accumulator_value(0);
  EXPECT_TRUE(CreateOptimizer(config).ok());  // a fixed rate needs no n
  config = LazyAdamConfig();
  config.mutable_lazy_adam()->set_beta_2(1);
  ExpectInvalid(config, "optimizer.lazy_adam.beta_2: 1 must be in [0, 1)");
}

}  // namespace
}  // namespace ps
}  // namespace pstrain

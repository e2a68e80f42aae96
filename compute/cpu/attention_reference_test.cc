// AttentionOp against PyTorch: testdata/attention_reference.json holds Keras
// 3's MultiHeadAttention as PyTorch computes it (float64, autograd) from
// Keras's own einsum equations and variable shapes, from float32 inputs and
// weights (testdata/attention_reference.py writes it).
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "compute/cpu/attention.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

// Max |ours - torch| relative to the tensor's largest |value|, or to
// kFloor of the problem's largest gradient where that is larger (key/bias's
// gradient is exactly 0; see attention_test.cc).
constexpr double kForwardTolerance = 2e-6;
constexpr double kGradientTolerance = 2e-5;
constexpr double kFloor = 5e-2;

nlohmann::json LoadReference() {
  const char* root = std::getenv("TEST_SRCDIR");
  const std::string path =
      std::string(root != nullptr ? root : ".") +
      "/pstrain/compute/cpu/testdata/attention_reference.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return in.good() ? nlohmann::json::parse(in) : nlohmann::json();
}

std::vector<float> Floats(const nlohmann::json& values) {
  std::vector<float> out;
  for (const nlohmann::json& v : values) {
    out.push_back(static_cast<float>(v.get<double>()));
  }
  return out;
}

double MaxAbs(const nlohmann::json& values) {
  double max = 0;
  for (const nlohmann::json& v : values) {
    max = std::max(max, std::abs(v.get<double>()));
  }
  return max;
}

void ExpectClose(const std::string& what, const std::vector<float>& ours,
                 const nlohmann::json& torch, double tolerance, double floor) {
  ASSERT_EQ(ours.size(), torch.size()) << what;
  const double scale = std::max(floor, MaxAbs(torch));
  for (size_t i = 0; i < ours.size(); ++i) {
    ASSERT_NEAR(ours[i], torch[i].get<double>(), tolerance * scale)
        << what << "[" << i << "]";
  }
}

TEST(AttentionReference, MatchesPyTorch) {
  const nlohmann::json reference = LoadReference();
  ASSERT_TRUE(reference.contains("cases"));
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create({});
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_GE(reference["cases"].size(), 3u);
  for (const nlohmann::json& c : reference["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const nlohmann::json& js = c["shape"];
    AttentionShape s;
    s.batch = js["batch"];
    s.tq = js["tq"];
    s.tv = js["tv"];
    s.dq = js["dq"];
    s.dk = js["dk"];
    s.dv = js["dv"];
    s.heads = js["heads"];
    s.key_dim = js["key_dim"];
    s.value_dim = js["value_dim"];
    s.output_dim = js["output_dim"];
    s.use_bias = js["use_bias"];
    s.causal = js["causal"];
    const bool self = js["self_attention"];
    absl::StatusOr<std::unique_ptr<AttentionOp>> op =
        AttentionOp::Create(s, engine->get());
    ASSERT_TRUE(op.ok()) << op.status();

    std::map<std::string, std::vector<float>> vars, grads;
    for (const AttentionVariable& v : AttentionOp::Variables(s)) {
      ASSERT_TRUE(c["variables"].contains(v.name)) << v.name;
      vars[v.name] = Floats(c["variables"][v.name]);
      grads[v.name].assign(vars[v.name].size(), NAN);
    }
    auto weight = [&](const char* name) {
      return vars.count(name) ? vars[name].data() : nullptr;
    };
    auto grad = [&](const char* name) {
      return grads.count(name) ? grads[name].data() : nullptr;
    };
    AttentionWeights w;
    w.query_kernel = weight("query/kernel");
    w.query_bias = weight("query/bias");
    w.key_kernel = weight("key/kernel");
    w.key_bias = weight("key/bias");
    w.value_kernel = weight("value/kernel");
    w.value_bias = weight("value/bias");
    w.output_kernel = weight("attention_output/kernel");
    w.output_bias = weight("attention_output/bias");

    // Self-attention passes one buffer for all three inputs and one for
    // all three input gradients.
    std::vector<float> query = Floats(c["inputs"]["query"]);
    std::vector<float> key = Floats(c["inputs"]["key"]);
    std::vector<float> value = Floats(c["inputs"]["value"]);
    const float* k = self ? query.data() : key.data();
    const float* v = self ? query.data() : value.data();
    std::vector<float> y(c["y"].size(), NAN);
    ASSERT_TRUE((*op)->Forward(query.data(), k, v, w, y.data()).ok());
    ExpectClose("y", y, c["y"], kForwardTolerance, 0);

    grads["query"].assign(query.size(), NAN);
    if (!self) {
      grads["key"].assign(key.size(), NAN);
      grads["value"].assign(value.size(), NAN);
    }
    AttentionGradients g;
    g.query_kernel = grad("query/kernel");
    g.query_bias = grad("query/bias");
    g.key_kernel = grad("key/kernel");
    g.key_bias = grad("key/bias");
    g.value_kernel = grad("value/kernel");
    g.value_bias = grad("value/bias");
    g.output_kernel = grad("attention_output/kernel");
    g.output_bias = grad("attention_output/bias");
    g.query = grad("query");
    g.key = self ? g.query : grad("key");
    g.value = self ? g.query : grad("value");
    const std::vector<float> dy = Floats(c["dy"]);
    ASSERT_TRUE((*op)->Backward(query.data(), k, v, w, dy.data(), g).ok());

    double floor = 0;
    for (const auto& item : c["gradients"].items()) {
      floor = std::max(floor, MaxAbs(item.value()));
    }
    ASSERT_EQ(c["gradients"].size(), grads.size());
    for (const auto& [name, ours] : grads) {
      ASSERT_TRUE(c["gradients"].contains(name)) << name;
      ExpectClose(name, ours, c["gradients"][name], kGradientTolerance,
                  kFloor * floor);
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace worker
}  // namespace pstrain

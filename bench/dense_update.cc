// What one async update of a dense ps piece costs, without the network,
// with and without a pull holding the value: a pull reply lends the value
// to gRPC (ValueView::owner) until its bytes are sent, and an update that
// finds it lent writes a new copy instead. Rounds alternate between the
// two cases; prints the median ms per update and GB/s of gradient applied
// for each. Not a test: run it by hand, before and after a change to
// ps/dense_variable.cc.
//
//   bazel run --config=opt //bench:dense_update -- --mb=1 --optimizer=sgd
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/time.h"
#include "common/process.h"
#include "ps/dense_variable.h"
#include "ps/optimizer.h"

ABSL_FLAG(double, mb, 1, "MB of the piece (and of each gradient)");
ABSL_FLAG(int, rounds, 200, "Timed updates of each case");
ABSL_FLAG(std::string, optimizer, "sgd", "sgd or adam");

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  pstrain::TuneMallocForLargeBuffers();  // as the ps
  const int64_t floats =
      static_cast<int64_t>(absl::GetFlag(FLAGS_mb) * (1 << 20)) / 4;
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const std::string kind = absl::GetFlag(FLAGS_optimizer);
  if (floats < 1 || rounds < 1 || (kind != "sgd" && kind != "adam")) {
    std::fprintf(stderr, "--mb > 0, --rounds >= 1, --optimizer sgd|adam\n");
    return 2;
  }
  pstrain::OptimizerConfig config;
  config.set_learning_rate(1e-6);
  if (kind == "sgd") {
    config.mutable_sgd();
  } else {
    config.mutable_adam()->set_beta_1(0.9f);
    config.mutable_adam()->set_beta_2(0.999f);
    config.mutable_adam()->set_epsilon(1e-7f);
  }
  auto optimizer = pstrain::ps::CreateOptimizer(config);
  if (!optimizer.ok()) {
    std::fprintf(stderr, "%s\n", optimizer.status().ToString().c_str());
    return 1;
  }
  pstrain::VariableDef def;
  def.set_name("w");
  def.set_dtype(pstrain::DT_FLOAT);
  def.mutable_shape()->add_dims(floats);
  def.mutable_initializer()->mutable_zeros();
  auto variable =
      pstrain::ps::DenseVariable::Create(def, 0, floats, optimizer->get());
  if (!variable.ok()) {
    std::fprintf(stderr, "%s\n", variable.status().ToString().c_str());
    return 1;
  }
  std::vector<float> gradient(floats);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (float& g : gradient) g = uniform(rng);
  const pstrain::ps::Chunk chunk{
      0, absl::string_view(reinterpret_cast<const char*>(gradient.data()),
                           gradient.size() * 4)};

  std::vector<double> ms[2];
  for (int round = -10; round < rounds; ++round) {
    for (int held = 0; held < 2; ++held) {
      std::shared_ptr<const void> lent;
      if (held) {
        auto read = (*variable)->Read(
            0, absl::InfiniteFuture(), 1,
            [&](const pstrain::ps::ValueView& value) { lent = value.owner; });
        if (!read.ok() || lent == nullptr) {
          std::fprintf(stderr, "the value was not lent\n");
          return 1;
        }
      }
      const Clock::time_point start = Clock::now();
      (*variable)->ApplyAsync(/*batch_size=*/1, {&chunk, 1});
      const double seconds =
          std::chrono::duration<double>(Clock::now() - start).count();
      if (round >= 0) ms[held].push_back(seconds * 1e3);
    }
  }
  const double mb = floats * 4.0 / (1 << 20);
  for (int held = 0; held < 2; ++held) {
    const double median = Median(ms[held]);
    std::printf("%s, %.2f MB, %s: %.3f ms per update, %.2f GB/s\n",
                kind.c_str(), mb, held ? "held by a pull" : "not held",
                median, mb / 1024 / (median / 1e3));
  }
  return 0;
}

#include "common/metrics.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsRegistry, RendersCounterWithHelpTypeAndLabels) {
  MetricsRegistry registry;
  CounterFamily* pulls = registry.AddCounter("pstrain_ps_pulls_total",
                                             "Pulls served.", {"variable"});
  pulls->Get({"dense/kernel"})->Increment(3);
  pulls->Get({"dense/bias"})->Increment();
  EXPECT_EQ(registry.Render(),
            "# HELP pstrain_ps_pulls_total Pulls served.\n"
            "# TYPE pstrain_ps_pulls_total counter\n"
            "pstrain_ps_pulls_total{variable=\"dense/bias\"} 1\n"
            "pstrain_ps_pulls_total{variable=\"dense/kernel\"} 3\n");
}

TEST(MetricsRegistry, CounterIgnoresNegativeAmounts) {
  MetricsRegistry registry;
  Counter* c = registry.AddCounter("c_total", "c")->Get();
  c->Increment(2.5);
  c->Increment(-1);
  EXPECT_EQ(c->Value(), 2.5);
}

TEST(MetricsRegistry, GaugeSetsAndAdds) {
  MetricsRegistry registry;
  Gauge* g = registry.AddGauge("pstrain_g_bytes", "g")->Get();
  g->Set(10);
  g->Add(-2.5);
  EXPECT_EQ(g->Value(), 7.5);
  EXPECT_THAT(registry.Render(), HasSubstr("\npstrain_g_bytes 7.5\n"));
}

TEST(MetricsRegistry, HistogramBucketsAreCumulativeWithInfSumCount) {
  MetricsRegistry registry;
  Histogram* h =
      registry.AddHistogram("lat_seconds", "Latency.", {"rpc"}, {0.1, 1})
          ->Get({"Push"});
  h->Observe(0.05);
  h->Observe(0.1);  // on a bound: counted in that bucket (le)
  h->Observe(0.5);
  h->Observe(7);
  EXPECT_EQ(registry.Render(),
            "# HELP lat_seconds Latency.\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{rpc=\"Push\",le=\"0.10000000000000001\"} 2\n"
            "lat_seconds_bucket{rpc=\"Push\",le=\"1\"} 3\n"
            "lat_seconds_bucket{rpc=\"Push\",le=\"+Inf\"} 4\n"
            "lat_seconds_sum{rpc=\"Push\"} 7.6500000000000004\n"
            "lat_seconds_count{rpc=\"Push\"} 4\n");
}

TEST(MetricsRegistry, EscapesLabelValuesAndHelp) {
  MetricsRegistry registry;
  registry.AddGauge("g", "a \\ b\nc", {"name"})->Get({"x\"y\\z\nw"})->Set(1);
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# HELP g a \\\\ b\\nc\n"));
  EXPECT_THAT(text, HasSubstr("g{name=\"x\\\"y\\\\z\\nw\"} 1\n"));
}

TEST(MetricsRegistry, FormatsSpecialValues) {
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()),
            "-Inf");
  EXPECT_EQ(FormatSampleValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatSampleValue(42), "42");
  EXPECT_EQ(FormatSampleValue(0.25), "0.25");
}

TEST(MetricsRegistry, CollectorsRunBeforeEachRender) {
  MetricsRegistry registry;
  Gauge* held = registry.AddGauge("held", "h")->Get();
  int calls = 0;
  registry.AddCollector([&] { held->Set(++calls * 10); });
  EXPECT_THAT(registry.Render(), HasSubstr("held 10\n"));
  EXPECT_THAT(registry.Render(), HasSubstr("held 20\n"));
}

TEST(MetricsRegistry, SameLabelsGiveSameChild) {
  MetricsRegistry registry;
  CounterFamily* f = registry.AddCounter("f_total", "f", {"a"});
  EXPECT_EQ(f->Get({"x"}), f->Get({"x"}));
  EXPECT_NE(f->Get({"x"}), f->Get({"y"}));
}

TEST(MetricsRegistry, ConcurrentIncrementsAreAllCounted) {
  MetricsRegistry registry;
  Counter* c = registry.AddCounter("c_total", "c")->Get();
  Histogram* h = registry.AddHistogram("h", "h", {}, {1})->Get();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c->Increment();
        h->Observe(0.5);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(c->Value(), 40000);
  EXPECT_EQ(h->Read().cumulative.back(), 40000u);
  EXPECT_EQ(h->Read().sum, 20000);
}

TEST(MetricsRegistry, FamilyWithoutChildrenRendersOnlyHelpAndType) {
  MetricsRegistry registry;
  registry.AddCounter("none_total", "n", {"a"});
  EXPECT_EQ(registry.Render(),
            "# HELP none_total n\n# TYPE none_total counter\n");
}

TEST(MetricsRegistryDeathTest, BadOrRepeatedNameAborts) {
  MetricsRegistry registry;
  EXPECT_DEATH(registry.AddCounter("9bad", "x"), "bad metric name");
  registry.AddCounter("ok_total", "x");
  EXPECT_DEATH(registry.AddCounter("ok_total", "x"), "added twice");
  EXPECT_DEATH(registry.AddGauge("g", "x", {"__reserved"}), "bad label name");
  EXPECT_DEATH(registry.AddHistogram("h", "x", {}, {1, 0.5}), "increasing");
}

TEST(ProcessMetrics, ExposeBuildInfoAndStartTime) {
  MetricsRegistry registry;
  AddProcessMetrics(&registry, "worker", "cpu");
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("role=\"worker\",device=\"cpu\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_start_time_seconds gauge\n"));
  EXPECT_THAT(text, Not(HasSubstr("process_start_time_seconds 0\n")));
}

}  // namespace
}  // namespace pstrain

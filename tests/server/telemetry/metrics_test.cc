#include "server/telemetry/metrics.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::server {
namespace {

using ::testing::HasSubstr;

TEST(MetricsTest, CounterWithLabelsRendersHelpTypeAndSeriesInLabelOrder) {
  MetricRegistry registry;
  Counter& finished =
      registry.AddCounter("tomod_jobs_finished_total", "Jobs that ended.", {"outcome"});
  finished.Add({"succeeded"});
  finished.Add({"succeeded"}, 2);
  finished.Add({"failed"});
  finished.Add({"failed"}, -5);  // a counter never goes down
  finished.Add({"a", "b"});      // wrong label count: ignored
  EXPECT_EQ(registry.Render(),
            "# HELP tomod_jobs_finished_total Jobs that ended.\n"
            "# TYPE tomod_jobs_finished_total counter\n"
            "tomod_jobs_finished_total{outcome=\"failed\"} 1\n"
            "tomod_jobs_finished_total{outcome=\"succeeded\"} 3\n");
  EXPECT_EQ(finished.Value({"succeeded"}), 3);
}

TEST(MetricsTest, LabelValuesAndHelpAreEscaped) {
  MetricRegistry registry;
  Gauge& gauge = registry.AddGauge("g", "back\\slash and\nnewline \"quotes stay\"", {"name"});
  gauge.Set({"a\\b\"c\nd"}, 1.5);
  EXPECT_EQ(registry.Render(),
            "# HELP g back\\\\slash and\\nnewline \"quotes stay\"\n"
            "# TYPE g gauge\n"
            "g{name=\"a\\\\b\\\"c\\nd\"} 1.5\n");
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndEndWithInf) {
  MetricRegistry registry;
  Histogram& stages = registry.AddHistogram("s", "Stage seconds.", {"stage"}, {0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 5.0, 50.0, 500.0}) stages.Observe({"run"}, v);
  stages.Observe({"run"}, std::numeric_limits<double>::quiet_NaN());  // ignored
  EXPECT_EQ(registry.Render(),
            "# HELP s Stage seconds.\n"
            "# TYPE s histogram\n"
            "s_bucket{stage=\"run\",le=\"0.1\"} 2\n"  // le is inclusive: 0.1 counts here
            "s_bucket{stage=\"run\",le=\"1\"} 3\n"
            "s_bucket{stage=\"run\",le=\"10\"} 4\n"
            "s_bucket{stage=\"run\",le=\"+Inf\"} 6\n"
            "s_sum{stage=\"run\"} 555.65\n"
            "s_count{stage=\"run\"} 6\n");
}

TEST(MetricsTest, HistogramWithoutLabels) {
  MetricRegistry registry;
  registry.AddHistogram("h", "x", {}, {1}).Observe({}, 2);
  EXPECT_THAT(registry.Render(), HasSubstr("h_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 1\n"
                                           "h_sum 2\nh_count 1\n"));
}

TEST(MetricsTest, SampleValuesAreExactAndSpecialValuesNamed) {
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(-3), "-3");
  EXPECT_EQ(FormatSampleValue(17179869184.0), "17179869184");  // 16 GiB, no exponent
  EXPECT_EQ(FormatSampleValue(0.1), "0.1");
  EXPECT_EQ(FormatSampleValue(1.0 / 3.0), "0.3333333333333333");  // shortest round trip
  EXPECT_EQ(std::stod(FormatSampleValue(1e300)), 1e300);
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatSampleValue(std::nan("")), "NaN");
}

TEST(MetricsTest, CollectorsRunBeforeEachRenderAndFamiliesKeepTheirOrder) {
  MetricRegistry registry;
  Counter& first = registry.AddCounter("first_total", "1");
  Gauge& depth = registry.AddGauge("queue_depth", "2");
  int scrapes = 0;
  registry.AddCollector([&] { depth.Set({}, ++scrapes); });
  first.Add({});
  EXPECT_EQ(registry.Render(),
            "# HELP first_total 1\n# TYPE first_total counter\nfirst_total 1\n"
            "# HELP queue_depth 2\n# TYPE queue_depth gauge\nqueue_depth 1\n");
  EXPECT_THAT(registry.Render(), HasSubstr("queue_depth 2\n"));
  depth.Clear();
  EXPECT_EQ(depth.Value({}), 0);
}

TEST(MetricsDeathTest, BadNamesAreProgrammingErrors) {
  EXPECT_DEATH(MetricRegistry().AddCounter("1bad", "x"), "not a valid Prometheus name");
  EXPECT_DEATH(MetricRegistry().AddGauge("ok", "x", {"bad-label"}), "not a valid");
  EXPECT_DEATH(MetricRegistry().AddHistogram("ok", "x", {"le"}, {1}), "reserved");
  EXPECT_DEATH(MetricRegistry().AddHistogram("ok", "x", {}, {2, 1}), "increasing");
}

}  // namespace
}  // namespace tomo::server

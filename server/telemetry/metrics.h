// Metrics in the Prometheus text exposition format (version 0.0.4): counters, gauges and
// histograms with labels, kept in a registry that renders them all for a scrape. Written
// here because prometheus-cpp is not packaged in Debian 12; the format is small:
//
//   # HELP tomod_jobs_finished_total Jobs that ended, by outcome.
//   # TYPE tomod_jobs_finished_total counter
//   tomod_jobs_finished_total{outcome="succeeded"} 12
//   # TYPE tomod_stage_seconds histogram
//   tomod_stage_seconds_bucket{stage="run",le="0.5"} 3        (cumulative counts)
//   tomod_stage_seconds_bucket{stage="run",le="+Inf"} 5
//   tomod_stage_seconds_sum{stage="run"} 7.25
//   tomod_stage_seconds_count{stage="run"} 5
//
// Label values are escaped (backslash, double quote, newline), HELP text too (backslash,
// newline). Families render in registration order, their series in label order.
//
// Thread safety: every method may be called from any thread. Updates take a per-family
// mutex; Render() runs the collectors first (outside any family lock), so a collector may
// set gauges.
//
//   MetricRegistry registry;
//   Counter& finished = registry.AddCounter("tomod_jobs_finished_total",
//                                           "Jobs that ended, by outcome.", {"outcome"});
//   finished.Add({"succeeded"});
//   std::string text = registry.Render();
//
// Family and label names must match [a-zA-Z_:][a-zA-Z0-9_:]* (checked: a bad name is a
// programming error and aborts); a value with the wrong number of labels is ignored.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace tomo::server {

using LabelValues = std::vector<std::string>;

// The common part of a metric family: name, help, type and label names.
class MetricFamily {
 public:
  virtual ~MetricFamily() = default;
  const std::string& name() const { return name_; }
  // Appends the family's HELP, TYPE and sample lines to out.
  virtual void Render(std::string& out) const = 0;

 protected:
  MetricFamily(std::string name, std::string help, std::vector<std::string> labels);
  // HELP and TYPE lines.
  void RenderHeader(const char* type, std::string& out) const;
  // {a="x",b="y"} for values (empty string without labels); extra is one more label pair
  // already rendered (a histogram's le="...").
  std::string LabelSet(const LabelValues& values, absl::string_view extra = "") const;
  bool Fits(const LabelValues& values) const { return values.size() == labels_.size(); }

 private:
  std::string name_;
  std::string help_;
  std::vector<std::string> labels_;
};

// A value that only goes up (events, bytes).
class Counter final : public MetricFamily {
 public:
  Counter(std::string name, std::string help, std::vector<std::string> labels)
      : MetricFamily(std::move(name), std::move(help), std::move(labels)) {}
  // Negative amounts are ignored: a counter never goes down.
  void Add(const LabelValues& values, double amount = 1.0);
  double Value(const LabelValues& values) const;
  void Render(std::string& out) const override;

 private:
  mutable absl::Mutex mu_;
  std::map<LabelValues, double> values_ ABSL_GUARDED_BY(mu_);
};

// A value that goes up and down (queue depth, free memory).
class Gauge final : public MetricFamily {
 public:
  Gauge(std::string name, std::string help, std::vector<std::string> labels)
      : MetricFamily(std::move(name), std::move(help), std::move(labels)) {}
  void Set(const LabelValues& values, double value);
  // Forgets every series (for gauges a collector rebuilds at each scrape).
  void Clear();
  double Value(const LabelValues& values) const;
  void Render(std::string& out) const override;

 private:
  mutable absl::Mutex mu_;
  std::map<LabelValues, double> values_ ABSL_GUARDED_BY(mu_);
};

// Observations counted into buckets by upper bound (le), with their sum and count.
class Histogram final : public MetricFamily {
 public:
  // bounds: increasing, finite; +Inf is implicit.
  Histogram(std::string name, std::string help, std::vector<std::string> labels,
            std::vector<double> bounds);
  void Observe(const LabelValues& values, double value);
  void Render(std::string& out) const override;

 private:
  struct Series {
    std::vector<uint64_t> counts;  // per bucket, not cumulative; last is +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::map<LabelValues, Series> series_ ABSL_GUARDED_BY(mu_);
};

class MetricRegistry {
 public:
  Counter& AddCounter(std::string name, std::string help, std::vector<std::string> labels = {});
  Gauge& AddGauge(std::string name, std::string help, std::vector<std::string> labels = {});
  Histogram& AddHistogram(std::string name, std::string help, std::vector<std::string> labels,
                          std::vector<double> bounds);
  // Runs before each Render(): for values read at scrape time (queue depth, device memory).
  void AddCollector(std::function<void()> collect);
  // The whole exposition, ending with a newline.
  std::string Render() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<MetricFamily>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> collectors_ ABSL_GUARDED_BY(mu_);
};

// A sample value as the format writes it: integers without exponent or point, "+Inf",
// "-Inf", "NaN", else the shortest text that reads back the same double.
std::string FormatSampleValue(double value);
// A label value with backslash, double quote and newline escaped.
std::string EscapeLabelValue(absl::string_view value);

// Content-Type of Render()'s text.
inline constexpr absl::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace tomo::server

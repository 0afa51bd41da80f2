#include "server/telemetry/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tomo::server {
namespace {

bool IsValidName(absl::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok =
        absl::ascii_isalpha(c) || c == '_' || c == ':' || (i > 0 && absl::ascii_isdigit(c));
    if (!ok) return false;
  }
  return true;
}

void CheckName(absl::string_view what, absl::string_view name) {
  if (IsValidName(name)) return;
  std::fprintf(stderr, "metrics: %.*s \"%.*s\" is not a valid Prometheus name\n",
               static_cast<int>(what.size()), what.data(), static_cast<int>(name.size()),
               name.data());
  std::abort();
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Byte counters pass 2^31 quickly; integers up to 2^53 are exact in a double.
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buffer[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

// ---------------------------------------------------------------- MetricFamily

MetricFamily::MetricFamily(std::string name, std::string help, std::vector<std::string> labels)
    : name_(std::move(name)), help_(std::move(help)), labels_(std::move(labels)) {
  CheckName("metric name", name_);
  for (const std::string& label : labels_) {
    CheckName("label name", label);
    if (label == "le") {  // the histogram's own label
      std::fprintf(stderr, "metrics: %s: the label name \"le\" is reserved\n", name_.c_str());
      std::abort();
    }
  }
}

void MetricFamily::RenderHeader(const char* type, std::string& out) const {
  absl::StrAppend(&out, "# HELP ", name_, " ", EscapeHelp(help_), "\n# TYPE ", name_, " ", type,
                  "\n");
}

std::string MetricFamily::LabelSet(const LabelValues& values, absl::string_view extra) const {
  if (labels_.empty() && extra.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels_.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? "," : "", labels_[i], "=\"", EscapeLabelValue(values[i]), "\"");
  }
  if (!extra.empty()) absl::StrAppend(&out, labels_.empty() ? "" : ",", extra);
  out += "}";
  return out;
}

// ---------------------------------------------------------------- Counter

void Counter::Add(const LabelValues& values, double amount) {
  if (!Fits(values) || !(amount >= 0)) return;
  absl::MutexLock lock(&mu_);
  values_[values] += amount;
}

double Counter::Value(const LabelValues& values) const {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(values);
  return it == values_.end() ? 0.0 : it->second;
}

void Counter::Render(std::string& out) const {
  RenderHeader("counter", out);
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, value] : values_) {
    absl::StrAppend(&out, name(), LabelSet(labels), " ", FormatSampleValue(value), "\n");
  }
}

// ---------------------------------------------------------------- Gauge

void Gauge::Set(const LabelValues& values, double value) {
  if (!Fits(values)) return;
  absl::MutexLock lock(&mu_);
  values_[values] = value;
}

void Gauge::Clear() {
  absl::MutexLock lock(&mu_);
  values_.clear();
}

double Gauge::Value(const LabelValues& values) const {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(values);
  return it == values_.end() ? 0.0 : it->second;
}

void Gauge::Render(std::string& out) const {
  RenderHeader("gauge", out);
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, value] : values_) {
    absl::StrAppend(&out, name(), LabelSet(labels), " ", FormatSampleValue(value), "\n");
  }
}

// ---------------------------------------------------------------- Histogram

Histogram::Histogram(std::string name, std::string help, std::vector<std::string> labels,
                     std::vector<double> bounds)
    : MetricFamily(std::move(name), std::move(help), std::move(labels)),
      bounds_(std::move(bounds)) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1])) {
      std::fprintf(stderr, "metrics: histogram bucket bounds must be finite and increasing\n");
      std::abort();
    }
  }
}

void Histogram::Observe(const LabelValues& values, double value) {
  if (!Fits(values) || std::isnan(value)) return;
  size_t bucket = 0;
  while (bucket < bounds_.size() && value > bounds_[bucket]) ++bucket;
  absl::MutexLock lock(&mu_);
  Series& series = series_[values];
  if (series.counts.empty()) series.counts.assign(bounds_.size() + 1, 0);
  ++series.counts[bucket];
  series.sum += value;
  ++series.count;
}

void Histogram::Render(std::string& out) const {
  RenderHeader("histogram", out);
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, series] : series_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += series.counts[i];
      const std::string le =
          i < bounds_.size() ? FormatSampleValue(bounds_[i]) : std::string("+Inf");
      absl::StrAppend(&out, name(), "_bucket", LabelSet(labels, absl::StrCat("le=\"", le, "\"")),
                      " ", cumulative, "\n");
    }
    absl::StrAppend(&out, name(), "_sum", LabelSet(labels), " ", FormatSampleValue(series.sum),
                    "\n");
    absl::StrAppend(&out, name(), "_count", LabelSet(labels), " ", series.count, "\n");
  }
}

// ---------------------------------------------------------------- MetricRegistry

Counter& MetricRegistry::AddCounter(std::string name, std::string help,
                                    std::vector<std::string> labels) {
  auto family = std::make_unique<Counter>(std::move(name), std::move(help), std::move(labels));
  Counter& counter = *family;
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return counter;
}

Gauge& MetricRegistry::AddGauge(std::string name, std::string help,
                                std::vector<std::string> labels) {
  auto family = std::make_unique<Gauge>(std::move(name), std::move(help), std::move(labels));
  Gauge& gauge = *family;
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return gauge;
}

Histogram& MetricRegistry::AddHistogram(std::string name, std::string help,
                                        std::vector<std::string> labels,
                                        std::vector<double> bounds) {
  auto family = std::make_unique<Histogram>(std::move(name), std::move(help), std::move(labels),
                                            std::move(bounds));
  Histogram& histogram = *family;
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return histogram;
}

void MetricRegistry::AddCollector(std::function<void()> collect) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collect));
}

std::string MetricRegistry::Render() const {
  std::vector<std::function<void()>> collectors;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
  }
  for (const auto& collect : collectors) collect();
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& family : families_) family->Render(out);
  return out;
}

}  // namespace tomo::server

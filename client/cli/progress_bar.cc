#include "client/cli/progress_bar.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tomo::cli {
namespace {

constexpr int kBarWidth = 30;
constexpr size_t kMaxLabel = 40;
constexpr auto kMinRedraw = std::chrono::milliseconds(100);

}  // namespace

void ProgressBar::Update(double fraction, const std::string& label) {
  if (!enabled_) return;
  if (!(fraction >= 0)) fraction = 0;  // NaN too
  fraction = std::min(fraction, 1.0);
  const int percent = static_cast<int>(std::floor(fraction * 100.0));
  const auto now = std::chrono::steady_clock::now();
  const bool changed = label != last_label_ || percent != last_percent_;
  if (!changed) return;
  if (drawn_ && label == last_label_ && percent != 100 && now - last_draw_ < kMinRedraw) {
    return;
  }
  const int filled = static_cast<int>(std::lround(fraction * kBarWidth));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kBarWidth - filled), '.');
  std::string shown = label.size() > kMaxLabel ? label.substr(0, kMaxLabel - 3) + "..." : label;
  std::fprintf(stderr, "\r[%s] %3d%%  %s\x1b[K", bar.c_str(), percent, shown.c_str());
  std::fflush(stderr);
  drawn_ = true;
  last_percent_ = percent;
  last_label_ = label;
  last_draw_ = now;
}

void ProgressBar::Finish() {
  if (!drawn_) return;
  std::fputc('\n', stderr);
  std::fflush(stderr);
  drawn_ = false;
  last_percent_ = -1;
  last_label_.clear();
}

}  // namespace tomo::cli

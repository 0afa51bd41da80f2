#include "client/cli/progress_bar.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tomo::cli {
namespace {

constexpr int kMaxBarWidth = 30;
constexpr auto kMinRedraw = std::chrono::milliseconds(100);
constexpr auto kLineInterval = std::chrono::seconds(10);

// Columns of the terminal on stderr ($COLUMNS, else 80, when it does not say).
int TerminalWidth() {
  struct winsize size {};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS")) {
    const int value = std::atoi(columns);
    if (value > 0) return value;
  }
  return 80;
}

std::string FirstWord(const std::string& label) { return label.substr(0, label.find(' ')); }

// The label with digits dropped: a new stage, not a new count.
std::string StageOf(const std::string& label) {
  std::string stage;
  for (char c : label) {
    if (!std::isdigit(static_cast<unsigned char>(c))) stage += c;
  }
  return stage;
}

std::string Human(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  return unit == 0 ? absl::StrFormat("%.0f B", bytes) : absl::StrFormat("%.1f %s", bytes, units[unit]);
}

}  // namespace

std::string FormatDuration(double seconds) {
  const int64_t total = static_cast<int64_t>(std::max(0.0, std::floor(seconds)));
  const int64_t h = total / 3600, m = (total / 60) % 60, s = total % 60;
  return h > 0 ? absl::StrFormat("%d:%02d:%02d", h, m, s) : absl::StrFormat("%d:%02d", m, s);
}

std::string ProgressBar::Describe(double fraction, const std::string& label, double elapsed_s) {
  std::string text = absl::StrFormat("%3d%%  %s  %s", static_cast<int>(std::floor(fraction * 100)),
                                     label, FormatDuration(elapsed_s));
  // An ETA once a little is done and some time has passed: earlier guesses mislead.
  if (fraction >= 0.01 && fraction < 1.0 && elapsed_s >= 1.0) {
    absl::StrAppend(&text, "  ETA ", FormatDuration(elapsed_s * (1.0 - fraction) / fraction));
  }
  return text;
}

void ProgressBar::UpdateBytes(uint64_t done, uint64_t total, const std::string& what) {
  if (!enabled()) return;
  const double elapsed =
      phase_ == what ? std::chrono::duration<double>(Clock::now() - phase_start_).count() : 0.0;
  std::string label = absl::StrCat(what, " ", Human(static_cast<double>(done)));
  if (total > 0) absl::StrAppend(&label, " / ", Human(static_cast<double>(total)));
  if (elapsed >= 0.5) {
    absl::StrAppend(&label, "  ", Human(static_cast<double>(done) / elapsed), "/s");
  }
  Update(total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0.0, label);
}

void ProgressBar::Update(double fraction, const std::string& label) {
  if (!enabled()) return;
  if (!(fraction >= 0)) fraction = 0;  // NaN too
  fraction = std::min(fraction, 1.0);
  const int percent = static_cast<int>(std::floor(fraction * 100.0));
  const auto now = Clock::now();
  if (FirstWord(label) != phase_) {
    phase_ = FirstWord(label);
    phase_start_ = now;
  }
  if (style_ == ProgressStyle::kLines) {
    const std::string stage = StageOf(label);
    if (stage == stage_ && now - last_draw_ < kLineInterval && percent != 100) return;
    stage_ = stage;
    Draw(fraction, percent, label, now);
    return;
  }
  const bool changed = label != last_label_ || percent != last_percent_;
  if (!changed) return;
  if (drawn_ && FirstWord(label) == FirstWord(last_label_) && percent != 100 &&
      now - last_draw_ < kMinRedraw) {
    return;
  }
  Draw(fraction, percent, label, now);
}

void ProgressBar::Draw(double fraction, int percent, const std::string& label,
                       Clock::time_point now) {
  const double elapsed = std::chrono::duration<double>(now - phase_start_).count();
  if (style_ == ProgressStyle::kLines) {
    std::fprintf(stderr, "progress: %s\n", Describe(fraction, label, elapsed).c_str());
    std::fflush(stderr);
    last_draw_ = now;
    return;
  }
  // [bar] then the text; the label is cut (with "...") to what the terminal leaves for it.
  const int width = TerminalWidth();
  const int bar_width = std::clamp(width / 4, 10, kMaxBarWidth);
  const int filled = static_cast<int>(std::lround(fraction * bar_width));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(bar_width - filled), '.');
  std::string text = Describe(fraction, label, elapsed);
  const size_t room = static_cast<size_t>(std::max(10, width - bar_width - 4));
  if (text.size() > room) {
    // Keep the times (after the label) and cut the label's end.
    const std::string times = text.substr(text.find(label) + label.size());
    constexpr size_t kPercentWidth = 6;  // "100%  "
    const size_t fixed = kPercentWidth + times.size() + 3;
    const size_t label_room = room > fixed ? room - fixed : 0;
    text = absl::StrFormat("%3d%%  %s...%s", percent, label.substr(0, label_room), times);
    if (text.size() > room) text.resize(room);
  }
  std::fprintf(stderr, "\r[%s] %s\x1b[K", bar.c_str(), text.c_str());
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

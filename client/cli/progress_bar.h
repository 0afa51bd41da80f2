// ProgressBar: progress of one command on stderr, in one of three styles:
//   kBar    a terminal: one line redrawn in place, as wide as the terminal,
//             "[#####.....]  42%  running sirt 21/50   0:12  ETA 0:17"
//           at most ten redraws a second unless the label changes or the work completes;
//   kLines  not a terminal (a log): plain lines "progress: running sirt 21/50  42%  0:12
//           ETA 0:17", one when the phase or stage changes and at most one every 10 s;
//   kNone   nothing (-q), so callers need not check.
// Elapsed time and ETA are those of the current phase (the label's first word: uploading,
// queued, running, fetching); the ETA follows from the phase's fraction done so far.
// UpdateBytes labels a transfer with its bytes and rate. Not thread-safe.
//
//   ProgressBar bar(ProgressWanted(global));
//   bar.UpdateBytes(12 << 20, 30 << 20, "uploading");
//   bar.Update(0.42, "running sirt 21/50");
//   bar.Finish();  // ends the line; also done by the destructor
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tomo::cli {

enum class ProgressStyle { kNone, kBar, kLines };

class ProgressBar {
 public:
  explicit ProgressBar(ProgressStyle style) : style_(style) {}
  ~ProgressBar() { Finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return style_ != ProgressStyle::kNone; }
  // fraction is clamped to [0, 1].
  void Update(double fraction, const std::string& label);
  // "uploading 12.0 MiB / 30.0 MiB  95.1 MiB/s" (total 0: unknown).
  void UpdateBytes(uint64_t done, uint64_t total, const std::string& what);
  // Ends the bar's line (when one was drawn); Update may start a new one afterwards.
  void Finish();

  // The line's text without the bar (for tests): label, percent, elapsed, ETA.
  static std::string Describe(double fraction, const std::string& label, double elapsed_s);

 private:
  using Clock = std::chrono::steady_clock;
  void Draw(double fraction, int percent, const std::string& label, Clock::time_point now);

  ProgressStyle style_;
  bool drawn_ = false;
  int last_percent_ = -1;
  std::string last_label_;
  std::string phase_;         // first word of the label
  std::string stage_;         // label without numbers, for kLines
  Clock::time_point phase_start_{};
  Clock::time_point last_draw_{};
};

// "0:07", "12:03", "1:02:03"
std::string FormatDuration(double seconds);

}  // namespace tomo::cli

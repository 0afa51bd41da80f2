// ProgressBar: one line on stderr redrawn in place ("[#####.....]  42%  filter"), for a
// terminal. Disabled bars do nothing, so callers need not check. Redraws at most ten
// times a second unless the label changes or the work completes. Not thread-safe.
//
//   ProgressBar bar(ProgressWanted(global));
//   bar.Update(0.42, "uploading 12.0 / 30.0 MiB");
//   bar.Finish();  // ends the line; also done by the destructor
#pragma once

#include <chrono>
#include <string>

namespace tomo::cli {

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  ~ProgressBar() { Finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return enabled_; }
  // fraction is clamped to [0, 1].
  void Update(double fraction, const std::string& label);
  // Ends the bar's line (when one was drawn); Update may start a new one afterwards.
  void Finish();

 private:
  bool enabled_;
  bool drawn_ = false;
  int last_percent_ = -1;
  std::string last_label_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace tomo::cli

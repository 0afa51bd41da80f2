// RunContext: what every algorithm is given besides its data: a way to report progress
// and a way to learn that it should stop. Both callbacks may be empty. They are called
// from the algorithm's thread and must be cheap and thread-safe.
//
//   RunContext context;
//   context.on_progress = [](const ProgressUpdate& p) { ... };
//   context.is_cancelled = [&] { return stop.load(); };
//   TOMO_RETURN_IF_ERROR(context.CheckCancelled("fbp / back projection"));
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tomo::core {

struct ProgressUpdate {
  double fraction = 0;  // [0, 1] of the whole run
  std::string stage;
  uint32_t iteration = 0;
  uint32_t iterations_total = 0;
  // Iterative methods: ||b - A x|| / ||b|| after the iteration; negative: none.
  double relative_residual = -1;
  // Methods minimising a cost function (ICD): its value after the iteration; negative: none.
  double cost = -1;
  // A finding to keep with the job's result (bad pixels replaced, an estimated centre of
  // rotation): one line for its events, notes and log; empty: none.
  std::string note = {};
};

struct RunContext {
  std::function<void(const ProgressUpdate&)> on_progress;
  std::function<bool()> is_cancelled;
  // Upper bound on device memory the run may use, in bytes; 0 means the device's free
  // memory.
  uint64_t memory_budget_bytes = 0;

  void Report(const ProgressUpdate& update) const {
    if (on_progress) on_progress(update);
  }
  // CANCELLED naming where the run stopped, or OK.
  absl::Status CheckCancelled(std::string_view where) const {
    if (is_cancelled && is_cancelled()) {
      // This Abseil's string_view is its own type, not std::string_view.
      return absl::CancelledError(
          absl::StrCat("cancelled at ", absl::string_view(where.data(), where.size())));
    }
    return absl::OkStatus();
  }
};

}  // namespace tomo::core

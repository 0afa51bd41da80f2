// What Ctrl-C (SIGINT) does while `tomo submit` runs, in the order the job gets there:
//   uploading       the upload stops; nothing was queued (tomod drops a partial upload).
//   committing      the upload is complete and tomod may be committing the job: it waits
//                   for tomod's answer (a second Ctrl-C leaves at once), then as below.
//   committed       the job id and how to watch or cancel it go to stderr; then by mode:
//                   kAsk asks "Cancel job <id>? [y/N]" when stdin and stderr are terminals
//                   (else keeps the job), kCancel cancels it, kKeep leaves it running.
// The command then exits 130. The job's id is on stdout as soon as it is committed
// (RunSubmit prints it), so an interrupted `submit` never loses it.
//
// SIGINT is blocked in the constructing thread, and in every thread started after it (make
// the guard before the gRPC channel), and taken by a thread of the guard's own (sigwait),
// so that a prompt and a cancel RPC run safely. The destructor unblocks SIGINT again.
//
//   SubmitInterrupts interrupts(SubmitInterrupts::Mode::kAsk, cancel_fn);
//   ... upload; on all bytes sent: interrupts.UploadDone();
//   interrupts.Committed(job->id());
//   ... watch: skip drawing while interrupts.prompting()
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace tomo::cli {

class SubmitInterrupts {
 public:
  enum class Mode { kAsk, kCancel, kKeep };
  // Cancels the job; returns its state's name after the cancel (e.g. "CANCELLED").
  using CancelFn = std::function<absl::StatusOr<std::string>(const std::string& job_id)>;

  SubmitInterrupts(Mode mode, CancelFn cancel);
  ~SubmitInterrupts();
  SubmitInterrupts(const SubmitInterrupts&) = delete;
  SubmitInterrupts& operator=(const SubmitInterrupts&) = delete;

  // Every byte was sent: a Ctrl-C from now on waits for the job's id.
  void UploadDone();
  void Committed(const std::string& job_id);
  // The upload failed: nothing to wait for.
  void Failed();
  // True while the prompt is on the terminal (progress bars should not draw then).
  bool prompting() const { return prompting_.load(); }

 private:
  enum class State { kUploading, kCommitting, kCommitted, kFailed };
  void WaitForSignals();
  [[noreturn]] void HandleCommitted(const std::string& job_id);

  const Mode mode_;
  const CancelFn cancel_;
  sigset_t signals_{};
  sigset_t previous_mask_{};
  std::atomic<bool> prompting_{false};
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable changed_;
  State state_ = State::kUploading;  // guarded by mu_
  std::string job_id_;               // guarded by mu_
  std::thread thread_;
};

// "ask", "cancel", "keep"; false for another name.
bool ParseInterruptMode(const std::string& name, SubmitInterrupts::Mode* mode);

}  // namespace tomo::cli

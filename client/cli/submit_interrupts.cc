#include "client/cli/submit_interrupts.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "client/cli/cli_common.h"

namespace tomo::cli {
namespace {

constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as shells report it

[[noreturn]] void Leave() {
  std::cout.flush();
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(kExitInterrupted);
}

}  // namespace

bool ParseInterruptMode(const std::string& name, SubmitInterrupts::Mode* mode) {
  if (name == "ask") {
    *mode = SubmitInterrupts::Mode::kAsk;
  } else if (name == "cancel") {
    *mode = SubmitInterrupts::Mode::kCancel;
  } else if (name == "keep") {
    *mode = SubmitInterrupts::Mode::kKeep;
  } else {
    return false;
  }
  return true;
}

SubmitInterrupts::SubmitInterrupts(Mode mode, CancelFn cancel)
    : mode_(mode), cancel_(std::move(cancel)) {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals_, &previous_mask_);
  thread_ = std::thread([this] { WaitForSignals(); });
}

SubmitInterrupts::~SubmitInterrupts() {
  stopping_.store(true);
  pthread_kill(thread_.native_handle(), SIGINT);
  thread_.join();
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
}

void SubmitInterrupts::UploadDone() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kUploading) state_ = State::kCommitting;
  changed_.notify_all();
}

void SubmitInterrupts::Committed(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = State::kCommitted;
  job_id_ = job_id;
  changed_.notify_all();
}

void SubmitInterrupts::Failed() {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = State::kFailed;
  changed_.notify_all();
}

void SubmitInterrupts::WaitForSignals() {
  int signal_number = 0;
  while (sigwait(&signals_, &signal_number) == 0) {
    if (stopping_.load()) return;
    std::unique_lock<std::mutex> lock(mu_);
    if (state_ == State::kUploading || state_ == State::kFailed) {
      lock.unlock();
      std::fprintf(stderr,
                   "\ntomo: submit: interrupted during the upload; no job was queued\n");
      Leave();
    }
    if (state_ == State::kCommitting) {
      std::fprintf(stderr,
                   "\ntomo: submit: the upload is complete; waiting for tomod to commit the "
                   "job so that its id is known (Ctrl-C again to leave now)\n");
      // Waits for the answer or a second Ctrl-C (the signal, taken by a helper thread).
      std::thread second([this] {
        int again = 0;
        sigset_t only = signals_;
        if (sigwait(&only, &again) == 0 && !stopping_.load()) {
          std::fprintf(stderr, "tomo: submit: left before tomod answered; `tomo list` shows "
                               "the job if it was committed\n");
          Leave();
        }
      });
      second.detach();
      changed_.wait(lock, [this] { return state_ != State::kCommitting; });
      if (state_ != State::kCommitted) {
        lock.unlock();
        std::fprintf(stderr, "tomo: submit: interrupted; no job was queued\n");
        Leave();
      }
    }
    const std::string job_id = job_id_;
    lock.unlock();
    HandleCommitted(job_id);
  }
}

void SubmitInterrupts::HandleCommitted(const std::string& job_id) {
  prompting_.store(true);
  std::fprintf(stderr,
               "\ntomo: submit: interrupted; job %s goes on in tomod. Watch it with `tomo "
               "watch %s`, fetch it with `tomo fetch %s`, cancel it with `tomo cancel %s`.\n",
               job_id.c_str(), job_id.c_str(), job_id.c_str(), job_id.c_str());
  bool cancel = mode_ == Mode::kCancel;
  if (mode_ == Mode::kAsk && ::isatty(STDIN_FILENO) == 1 && ::isatty(STDERR_FILENO) == 1) {
    std::fprintf(stderr, "Cancel job %s now? [y/N] ", job_id.c_str());
    std::fflush(stderr);
    char answer[16] = {0};
    cancel = std::fgets(answer, sizeof(answer), stdin) != nullptr &&
             (answer[0] == 'y' || answer[0] == 'Y');
  }
  if (!cancel) {
    std::fprintf(stderr, "tomo: submit: job %s left running\n", job_id.c_str());
    Leave();
  }
  absl::StatusOr<std::string> state = cancel_(job_id);
  if (!state.ok()) {
    std::fprintf(stderr, "tomo: submit: cancel %s: %s\n", job_id.c_str(),
                 OneLine(state.status().message()).c_str());
  } else {
    std::fprintf(stderr, "tomo: submit: job %s %s\n", job_id.c_str(),
                 *state == "CANCELLED" ? "cancelled"
                                       : ("cancel asked; it is " + *state +
                                          " and stops at its next step").c_str());
  }
  Leave();
}

}  // namespace tomo::cli

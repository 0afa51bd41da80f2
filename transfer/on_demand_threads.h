// OnDemandThreads: the worker threads of one pipeline (ChunkWriter's writer and checksum
// threads, MappedFileWriter's copy threads), running only while the pipeline has work. They
// start when work is queued and each ends after it has found nothing to do for a while, so
// an idle pipeline holds no thread: tomod keeps one pipeline per upload in progress, and a
// client that opens hundreds of uploads and then stalls must not hold hundreds of threads
// (issue 21 measured 3 per stalled upload). While bytes flow the threads never idle that
// long, so a busy pipeline starts its threads once.
//
// The owner keeps its queues under its own mutex; each thread runs the owner's loop, which
// waits for work with absl::Mutex::AwaitWithTimeout(..., idle_time) and, when that wait
// ends with nothing to do, calls ExitingLocked and returns. The owner calls StartLocked
// whenever it queues work, and Join once the loops end for good (its stopping flag).
//
//   mu_.Lock(); queue_.push_back(x); threads_.StartLocked(); mu_.Unlock();    // producer
//   // the loop:
//   absl::MutexLock lock(&mu_);
//   if (!mu_.AwaitWithTimeout(has_work_or_stopping, threads_.idle_time()) || stopping_) {
//     threads_.ExitingLocked();
//     return;
//   }
//
// Thread safety: StartLocked and ExitingLocked under the owner's mutex (the same one for
// every call); Join without it (again after a Join: nothing to wait for).
#pragma once

#include <functional>
#include <thread>
#include <vector>

#include "absl/time/time.h"

namespace tomo::transfer {

class OnDemandThreads {
 public:
  // count threads (at least 1), each running loop; none runs before StartLocked.
  OnDemandThreads(int count, absl::Duration idle_time, std::function<void()> loop);
  // Join must have been called (a joinable std::thread left would end the process).
  ~OnDemandThreads() = default;
  OnDemandThreads(const OnDemandThreads&) = delete;
  OnDemandThreads& operator=(const OnDemandThreads&) = delete;

  // How long a loop waits for work before its thread ends.
  absl::Duration idle_time() const { return idle_time_; }
  // Threads running now (under the owner's mutex).
  int running() const { return running_; }

  // Starts every thread that is not running (one that ended is joined first: its loop has
  // returned, so this takes no longer than its exit).
  void StartLocked();
  // The calling thread's loop returns right after this, without taking the owner's mutex
  // again.
  void ExitingLocked();
  // Waits for every thread; a thread of this set that calls it (a ChunkWriter destroyed
  // from its own callback) is detached instead, and must touch nothing of the owner after.
  void Join();

 private:
  struct Slot {
    std::thread thread;
    bool running = false;
  };
  const absl::Duration idle_time_;
  const std::function<void()> loop_;
  std::vector<Slot> slots_;
  int running_ = 0;
};

}  // namespace tomo::transfer

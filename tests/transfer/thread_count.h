// Threads of this process now (entries of /proc/self/task), and a wait for that number to
// fall to a bound: the transfer pipelines' threads end on their own after idling.
#pragma once

#include <chrono>
#include <filesystem>
#include <thread>

namespace tomo::transfer {

inline int ThreadsOfThisProcess() {
  int threads = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator("/proc/self/task")) {
    ++threads;
  }
  return threads;
}

// The thread count once it is at most bound, or the count after timeout.
inline int WaitForThreadsAtMost(int bound, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int threads = ThreadsOfThisProcess();
  while (threads > bound && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    threads = ThreadsOfThisProcess();
  }
  return threads;
}

}  // namespace tomo::transfer

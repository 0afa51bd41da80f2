#include "transfer/on_demand_threads.h"

#include <chrono>
#include <random>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/transfer/random_bytes.h"
#include "tests/transfer/thread_count.h"

namespace tomo::transfer {
namespace {

// A pipeline of one counter: the loops take work items until idle or stopping.
class Counter {
 public:
  explicit Counter(int threads) : threads_(threads, absl::Milliseconds(30), [this] { Loop(); }) {}
  ~Counter() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    threads_.Join();
  }
  void Add(int items) {
    absl::MutexLock lock(&mu_);
    work_ += items;
    threads_.StartLocked();
  }
  // Waits until every item is done; returns how many were done in all.
  int WaitDone() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Counter* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) { return c->work_ == 0; }, this));
    return done_;
  }
  int running() {
    absl::MutexLock lock(&mu_);
    return threads_.running();
  }

 private:
  void Loop() {
    for (;;) {
      absl::MutexLock lock(&mu_);
      const bool work = mu_.AwaitWithTimeout(
          absl::Condition(
              +[](Counter* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
                return c->work_ > 0 || c->stopping_;
              },
              this),
          threads_.idle_time());
      if (!work || stopping_) {
        threads_.ExitingLocked();
        return;
      }
      --work_;
      ++done_;
    }
  }

  absl::Mutex mu_;
  int work_ ABSL_GUARDED_BY(mu_) = 0;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  OnDemandThreads threads_;
};

// Threads start with work, end after the idle time, start again with more work, and every
// item is done exactly once.
TEST(OnDemandThreadsTest, StartWithWorkEndWhenIdleAndStartAgain) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  const int before = ThreadsOfThisProcess();
  {
    Counter counter(3);
    EXPECT_EQ(counter.running(), 0);
    EXPECT_EQ(ThreadsOfThisProcess(), before) << "threads before any work";
    int total = 0;
    for (int round = 0; round < 4; ++round) {
      const int items = 1 + static_cast<int>(rng() % 1000);
      total += items;
      counter.Add(items);
      EXPECT_EQ(counter.running(), 3);
      EXPECT_EQ(counter.WaitDone(), total);
      // Idle: every thread ends.
      EXPECT_LE(WaitForThreadsAtMost(before, std::chrono::seconds(10)), before);
      EXPECT_EQ(counter.running(), 0);
    }
    counter.Add(5);  // destroyed while the threads may still run
  }
  EXPECT_LE(WaitForThreadsAtMost(before, std::chrono::seconds(10)), before);
}

}  // namespace
}  // namespace tomo::transfer

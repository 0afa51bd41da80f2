// InputPrefetcher: reads the next queued job's input while the current job computes, so that
// a device does not idle between two jobs while the spool is read (a 2.4 GB input takes
// 0.3-1 s to read and check).
//
// When a worker starts a job it takes that job's input if it was read ahead (Take); once
// that input is in memory (JobInputStage::on_input_read, job_execution.h: the worker's own
// read comes first), it has its slot's thread read, under the lock that guards the queue
// (so that a cancel cannot come in between), the input of the job the queue would hand out
// next (PrefetchNext): ReadJobInput (job_execution.h), i.e. ResolveJobInput and the
// finite-value check, the same code and the same bytes as the worker's own read. When that
// job is handed out later, to this worker or another, Take gives its input to ExecuteJob,
// waiting for a read that is still going on.
//
// Bounds: one slot per worker, each holding at most one input, and max_bytes over all
// slots, counted from an estimate when a read starts (ProjectionDims of the geometry in
// float32, or twice the upload for a geometry from DICOM files) and from the real arrays
// once read. A job whose estimate does not fit what is left is not read ahead.
//
// Dropped (and counted "dropped"): the input of a job that is cancelled or otherwise leaves
// the queue without being run (Drop), an input whose read failed (the worker then reads the
// spool itself and the error comes from that, the normal path), an input larger than the
// cap once read, and whatever is held at Stop(). An input read by one worker's slot and
// taken by another worker is used, not dropped. Every Take counts "hit" or "miss". The
// spool stays the truth: nothing here is durable and a restart simply reads again.
//
// Memory: with options.pin_inputs (tomod: when its workers are CUDA devices), once a read
// has succeeded, and for inputs of at least options.min_pin_bytes, the slot's thread
// page-locks the projections where they lie
// (core::PinHostMemory, kept in JobInput::pinned_projections), off the worker's critical
// path: the CUDA backend then uploads them straight from that memory with asynchronous
// copies instead of first copying them into its own page-locked staging buffers. A pin that
// fails, or that pins nothing (no device, a CPU-only build), is not an error: the input is
// used unpinned, with the same bytes. The pages stay locked until the input is freed (by
// the worker that took it, once its job has run; or dropped here): the memory locked is at
// most max_bytes held here plus the inputs the workers run on. Pinning is part of the read
// (Take waits for it) and is counted as tomod_input_pinned_bytes_total and
// tomod_input_pin_failures_total (TomodMetrics).
//
// Thread safety: every method may be called from any thread. PrefetchNext and Drop do not
// block (they may be called under the caller's lock; apart from PrefetchNext's lookup, run
// at once on the calling thread, the prefetcher never calls its caller). Take blocks while
// the job's input is being read.
//
//   InputPrefetchOptions options;
//   options.pin_inputs = workers_are_cuda_devices;
//   InputPrefetcher prefetcher(/*slots=*/workers, /*max_bytes=*/8ull << 30, &metrics, options);
//   // worker `slot`, having popped `id`:
//   JobInputStage stage;
//   stage.prefetched = prefetcher.Take(id);
//   stage.on_input_read = [&] {
//     absl::MutexLock lock(&queue_mu);
//     prefetcher.PrefetchNext(slot, queue, lookup);
//   };
//   ExecuteJob(job, input_path, std::move(stage), output_dir, backends, registry, context);
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/devices/host_pinning.h"
#include "runner/job_input.h"
#include "server/jobs/job_queue.h"
#include "runner/job_spec.h"
#include "server/telemetry/tomod_metrics.h"

namespace tomo::server {

// tomod's --prefetch_bytes by default: two inputs of the largest common jobs (a few GB).
inline constexpr uint64_t kDefaultPrefetchBytes = uint64_t{8} << 30;

// What reading a queued job's input needs.
struct PrefetchJob {
  std::shared_ptr<const ValidatedJob> job;
  std::string input_path;
};

// Bytes the job's input takes in memory once read (the cap's estimate before reading).
uint64_t EstimatedInputBytes(const ValidatedJob& job);

// How to page-lock an input's projections: core::PinHostMemory, or a test's fake.
using HostPinner = std::function<absl::StatusOr<std::unique_ptr<core::PinnedHostRegion>>(
    const void* data, size_t bytes)>;

struct InputPrefetchOptions {
  // Page-lock the projections of each input read ahead (see "Memory" above). tomod: when
  // its workers are CUDA devices.
  bool pin_inputs = false;
  // Inputs smaller than this stay pageable: locking costs more than it saves on them (a
  // small 2D job's sinogram is copied in microseconds; 1000 of them were locked one by
  // one in tomod-bench's many-clients run).
  uint64_t min_pin_bytes = uint64_t{16} << 20;
  // Used when pin_inputs; empty: core::PinHostMemory.
  HostPinner pinner;
};

class InputPrefetcher {
 public:
  // nullopt when the id is not a queued job the caller knows.
  using JobLookup = std::function<std::optional<PrefetchJob>(const std::string& id)>;

  // slots: one per worker (at least 1). max_bytes: the cap over all slots; 0 disables
  // prefetching (PrefetchNext reads nothing, no thread is started). metrics: where the
  // outcomes are counted (may be null; not owned, must outlive this). options: pinning.
  InputPrefetcher(size_t slots, uint64_t max_bytes, TomodMetrics* metrics = nullptr,
                  InputPrefetchOptions options = {});
  // Stop().
  ~InputPrefetcher();
  InputPrefetcher(const InputPrefetcher&) = delete;
  InputPrefetcher& operator=(const InputPrefetcher&) = delete;

  bool enabled() const { return max_bytes_ > 0; }

  // When slot is free: starts reading, on slot's thread, the input of the first job in
  // queue's run order that no slot holds, if its estimated input fits what is left of the
  // cap; returns its id. nullopt (nothing read) otherwise.
  std::optional<std::string> PrefetchNext(size_t slot, const JobQueue& queue,
                                          const JobLookup& lookup);
  // The input of id when it was read ahead (counted "hit"; waits while it is being read),
  // else nullopt (counted "miss"; also when its read failed). Counts nothing when disabled.
  std::optional<JobInput> Take(const std::string& id);
  // Discards what is held for id (a cancelled job), counted "dropped"; a read in progress
  // is discarded when it ends. Harmless when nothing is held.
  void Drop(const std::string& id);
  // Drops everything and joins the slot threads (waiting for reads in progress); later
  // calls read nothing. Idempotent.
  void Stop();

  // Bytes counted against the cap now (being read or held, dropped reads still running
  // included).
  uint64_t held_bytes() const;
  // Ids held by some slot (being read or read), in slot order.
  std::vector<std::string> held_ids() const;
  // Waits until no read is in progress (for tests).
  void WaitForReads() const;

 private:
  enum class SlotState { kFree, kReading, kReady };
  struct Slot {
    SlotState state = SlotState::kFree;
    // The job held; empty while a dropped read is still running (kReading).
    std::string id;
    PrefetchJob job;
    // Counted against the cap: the estimate until the read ends, then the real size.
    uint64_t bytes = 0;
    std::optional<JobInput> input;  // kReady
  };

  void SlotLoop(size_t index);
  // The slot holding id (any state but kFree), or nullptr.
  Slot* FindLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeLocked(Slot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Count(const char* outcome);
  // With options_.pin_inputs: page-locks input's projections (on the slot's thread, no
  // lock held); a failure is logged and counted, and leaves the input unpinned.
  void Pin(const std::string& id, JobInput& input);

  const uint64_t max_bytes_;
  TomodMetrics* const metrics_;
  const InputPrefetchOptions options_;

  mutable absl::Mutex mu_;
  // Sized once in the constructor (threads point at their slot).
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  uint64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Threads of the slots, joined by Stop() (outside mu_).
  std::vector<std::thread> threads_;
  absl::Mutex stop_mu_;  // serialises Stop()
};

}  // namespace tomo::server

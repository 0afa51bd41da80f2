#include "server/jobs/input_prefetch.h"

#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/algorithms/reconstruction.h"
#include "runner/job_execution.h"
#include "server/telemetry/log.h"

namespace tomo::server {
namespace {

uint64_t ArrayBytes(const JobInput& input) {
  return static_cast<uint64_t>(input.projections.size_bytes()) +
         static_cast<uint64_t>(input.photon_statistics.size_bytes());
}

}  // namespace

uint64_t EstimatedInputBytes(const ValidatedJob& job) {
  // DICOM-CT-PD: the geometry is a placeholder until the files are read; their pixels are
  // 16-bit, so the float32 projections take about twice the upload.
  if (job.geometry_from_input_files) return 2 * job.input_bytes;
  const core::Dims3 dims = core::ProjectionDims(job.request.geometry);
  return static_cast<uint64_t>(dims.count()) * sizeof(float);
}

InputPrefetcher::InputPrefetcher(size_t slots, uint64_t max_bytes, TomodMetrics* metrics,
                                 InputPrefetchOptions options)
    : max_bytes_(max_bytes), metrics_(metrics), options_(std::move(options)) {
  if (max_bytes_ == 0) return;
  {
    absl::MutexLock lock(&mu_);
    slots_.resize(slots);
  }
  for (size_t i = 0; i < slots; ++i) threads_.emplace_back([this, i] { SlotLoop(i); });
}

InputPrefetcher::~InputPrefetcher() { Stop(); }

void InputPrefetcher::Count(const char* outcome) {
  if (metrics_ != nullptr) metrics_->InputPrefetch(outcome);
}

void InputPrefetcher::Pin(const std::string& id, JobInput& input) {
  const core::Array3D& projections = input.projections;
  if (projections.size_bytes() == 0) return;
  absl::StatusOr<std::unique_ptr<core::PinnedHostRegion>> pinned =
      options_.pinner ? options_.pinner(projections.data(), projections.size_bytes())
                      : core::PinHostMemory(projections.data(), projections.size_bytes());
  if (!pinned.ok() || *pinned == nullptr) {
    Log(absl::StrCat("job ", id, ": page-locking its input read ahead failed (",
                     pinned.ok() ? "no region" : pinned.status().ToString(),
                     "); it is used unpinned"));
    if (metrics_ != nullptr) metrics_->InputPinFailed();
    return;
  }
  if ((*pinned)->pinned() && metrics_ != nullptr) {
    metrics_->InputPinned((*pinned)->size_bytes());
  }
  // A region that pins nothing (no device, a CPU-only build) is kept too: harmless, and it
  // says why.
  input.pinned_projections = std::move(*pinned);
}

InputPrefetcher::Slot* InputPrefetcher::FindLocked(const std::string& id) {
  for (Slot& slot : slots_) {
    if (slot.state != SlotState::kFree && slot.id == id) return &slot;
  }
  return nullptr;
}

void InputPrefetcher::FreeLocked(Slot& slot) {
  held_bytes_ -= slot.bytes;
  slot = Slot();
}

std::optional<std::string> InputPrefetcher::PrefetchNext(size_t slot_index,
                                                         const JobQueue& queue,
                                                         const JobLookup& lookup) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || slot_index >= slots_.size()) return std::nullopt;
  Slot& slot = slots_[slot_index];
  if (slot.state != SlotState::kFree) return std::nullopt;
  std::optional<std::string> next = queue.PeekFirst(
      [this](const std::string& id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return FindLocked(id) == nullptr;
      });
  if (!next.has_value()) return std::nullopt;
  std::optional<PrefetchJob> job = lookup(*next);
  if (!job.has_value() || job->job == nullptr) return std::nullopt;
  const uint64_t estimate = EstimatedInputBytes(*job->job);
  if (estimate > max_bytes_ - held_bytes_) return std::nullopt;
  slot.state = SlotState::kReading;  // the slot's thread starts at once
  slot.id = *next;
  slot.job = std::move(*job);
  slot.bytes = estimate;
  held_bytes_ += estimate;
  return next;
}

std::optional<JobInput> InputPrefetcher::Take(const std::string& id) {
  if (!enabled()) return std::nullopt;
  absl::MutexLock lock(&mu_);
  Slot* slot = FindLocked(id);
  if (slot != nullptr && slot->state == SlotState::kReading) {
    auto read_ended = [slot, &id]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return slot->state != SlotState::kReading || slot->id != id;
    };
    mu_.Await(absl::Condition(&read_ended));
    // A read that failed or was dropped meanwhile has freed the slot (or it holds another
    // job by now).
    if (slot->state != SlotState::kReady || slot->id != id) slot = nullptr;
  }
  if (slot == nullptr) {
    Count("miss");
    return std::nullopt;
  }
  std::optional<JobInput> input = std::move(slot->input);
  FreeLocked(*slot);
  Count("hit");
  return input;
}

void InputPrefetcher::Drop(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Slot* slot = FindLocked(id);
  if (slot == nullptr) return;
  Count("dropped");
  if (slot->state == SlotState::kReading) {
    // The read cannot be interrupted: its thread frees the slot when it ends.
    slot->id.clear();
    return;
  }
  FreeLocked(*slot);
}

void InputPrefetcher::SlotLoop(size_t index) {
  for (;;) {
    PrefetchJob job;
    std::string id;
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [this, index]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stopping_ || slots_[index].state == SlotState::kReading;
      };
      mu_.Await(absl::Condition(&has_work));
      if (slots_[index].state != SlotState::kReading) return;  // stopping
      job = slots_[index].job;
      id = slots_[index].id;
    }
    absl::StatusOr<JobInput> input = ReadJobInput(*job.job, job.input_path);
    // Off the lock (locking a few GB of pages takes a while); not for an input that the
    // cap will drop anyway.
    if (input.ok() && options_.pin_inputs && ArrayBytes(*input) <= max_bytes_ &&
        ArrayBytes(*input) >= options_.min_pin_bytes) {
      Pin(id, *input);
    }
    absl::MutexLock lock(&mu_);
    Slot& slot = slots_[index];
    if (slot.id.empty()) {
      // Dropped while it was read (already counted).
      FreeLocked(slot);
      continue;
    }
    if (!input.ok()) {
      Log(absl::StrCat("job ", id, ": reading its input ahead failed (", input.status().message(),
                       "); the worker will read it itself"));
      FreeLocked(slot);
      Count("dropped");
      continue;
    }
    const uint64_t bytes = ArrayBytes(*input);
    if (bytes > max_bytes_ - (held_bytes_ - slot.bytes)) {
      Log(absl::StrCat("job ", id, ": its input read ahead takes ", bytes,
                       " bytes, more than is left of --prefetch_bytes ", max_bytes_,
                       "; dropped, the worker will read it itself"));
      FreeLocked(slot);
      Count("dropped");
      continue;
    }
    held_bytes_ = held_bytes_ - slot.bytes + bytes;
    slot.bytes = bytes;
    slot.input = std::move(*input);
    slot.state = SlotState::kReady;
  }
}

void InputPrefetcher::Stop() {
  absl::MutexLock stop_lock(&stop_mu_);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (Slot& slot : slots_) {
      if (slot.state == SlotState::kFree || slot.id.empty()) continue;
      Count("dropped");
      if (slot.state == SlotState::kReading) {
        slot.id.clear();
      } else {
        FreeLocked(slot);
      }
    }
  }
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

uint64_t InputPrefetcher::held_bytes() const {
  absl::MutexLock lock(&mu_);
  return held_bytes_;
}

std::vector<std::string> InputPrefetcher::held_ids() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const Slot& slot : slots_) {
    if (slot.state != SlotState::kFree && !slot.id.empty()) ids.push_back(slot.id);
  }
  return ids;
}

void InputPrefetcher::WaitForReads() const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const Slot& slot : slots_) {
      if (slot.state == SlotState::kReading) return false;
    }
    return true;
  };
  mu_.Await(absl::Condition(&idle));
}

}  // namespace tomo::server

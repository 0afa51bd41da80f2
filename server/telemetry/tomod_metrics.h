// TomodMetrics: what tomod exports on --metrics_port, over a MetricRegistry (metrics.h).
//
//   tomod_jobs_submitted_total                  jobs committed QUEUED by a Submit
//   tomod_jobs_finished_total{outcome}          succeeded | failed | cancelled
//   tomod_jobs_requeued_total{reason}           shutdown (a drain handed a run back) |
//                                               restart (a crash interrupted a run)
//   tomod_submits_refused_total{code}           Submits refused before any data was
//                                               stored, by status code (limits, draining)
//   tomod_stage_duration_seconds{stage}         histogram: upload (Submit's first message
//                                               to QUEUED), queue_wait (QUEUED to RUNNING),
//                                               run (RUNNING to its end), fetch (one
//                                               FetchResult call that sent its last byte)
//   tomod_upload_bytes_total                    projection bytes received
//   tomod_input_prefetch_total{outcome}         hit (a worker found its job's input read
//                                               ahead), miss (it read the spool itself),
//                                               dropped (an input read ahead, or a read
//                                               that failed, was discarded unused)
//   tomod_input_pinned_bytes_total              bytes of inputs read ahead that were
//                                               page-locked for the CUDA copies
//   tomod_input_pin_failures_total              inputs read ahead whose page-locking
//                                               failed (used unpinned)
//   tomod_upload_followed_total{outcome}        uploads a worker reconstructed while they
//                                               arrived (upload_stream.h): used (the job
//                                               only wrote its outputs), given_up (the
//                                               job ran from the spool), yielded (the
//                                               worker was needed elsewhere), aborted
//                                               (the upload failed or was cancelled)
//   tomod_fetch_bytes_total                     result bytes sent
//   tomod_job_runs_total{devices}               runs started, by the number of devices
//                                               each ran on ("1", "2", ...;
//                                               --multi_device_jobs)
//   tomod_queue_depth                           jobs queued or uploading (--max_queue_length)
//   tomod_jobs{state}                           jobs tomod holds, by state
//   tomod_watchers                              WatchJob streams open
//   tomod_spool_used_bytes                      what --max_spool_bytes bounds
//   tomod_spool_free_bytes                      free space of the spool's file system
//   tomod_spool_degraded                        1 while that is below --min_free_spool_bytes
//                                               (Submits refused; reads and deletes served)
//   tomod_devices_busy                          devices running a job (their worker's
//                                               own, or lent to a job of several) or
//                                               following an upload, now
//   tomod_device_memory_free_bytes{device}      per worker device, read at each scrape
//   tomod_device_memory_total_bytes{device}     (0 for the CPU, which reports none)
//   tomod_device_utilization_ratio{device}      NVML's GPU utilisation (gpu_utilization.h)
//   tomod_matrix_cache_bytes                    ART matrices kept (--matrix_cache_bytes)
//   tomod_matrix_cache_reused                   art jobs that reused a kept matrix, and
//   tomod_matrix_cache_built                    those that built theirs (since start)
//   tomod_kept_host_bytes                       freed large host arrays kept mapped for
//                                               later ones (--kept_host_memory_bytes)
//
// Thread-safe. The gauges read at scrape time (queue depth, jobs, watchers, spool,
// devices) are filled by a collector that the owner adds (TomodServer does).
//
//   TomodMetrics metrics;
//   metrics.StageDone(Stage::kRun, 1.5);
//   std::string text = metrics.registry().Render();
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "server/telemetry/metrics.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

class TomodMetrics {
 public:
  enum class Stage { kUpload, kQueueWait, kRun, kFetch };

  TomodMetrics();
  TomodMetrics(const TomodMetrics&) = delete;
  TomodMetrics& operator=(const TomodMetrics&) = delete;

  MetricRegistry& registry() { return registry_; }
  const MetricRegistry& registry() const { return registry_; }

  // A persisted state change of a job (JobManager calls it for each): counts submissions
  // (UPLOADING -> QUEUED) and ends (-> a terminal state).
  void StateChanged(tomoserve::v1::JobState from, tomoserve::v1::JobState to);
  void Requeued(absl::string_view reason);
  void SubmitRefused(absl::string_view code);
  // A call refused as UNAUTHENTICATED (security/authenticator.h).
  void Unauthenticated();
  void StageDone(Stage stage, double seconds);
  void UploadBytes(uint64_t bytes);
  void FetchBytes(uint64_t bytes);
  // InputPrefetcher's outcomes: "hit", "miss" or "dropped".
  void InputPrefetch(absl::string_view outcome);
  const Counter& input_prefetch() const { return input_prefetch_; }
  // InputPrefetcher's page-locking: bytes locked, and inputs whose locking failed.
  void InputPinned(uint64_t bytes);
  void InputPinFailed();
  const Counter& input_pinned_bytes() const { return input_pinned_bytes_; }
  const Counter& input_pin_failures() const { return input_pin_failures_; }
  // A followed upload's end: "used", "given_up", "yielded" or "aborted".
  void UploadFollowed(absl::string_view outcome);
  const Counter& upload_followed() const { return upload_followed_; }
  // A run started on this many devices (1 unless --multi_device_jobs let it take more).
  void RunStarted(size_t devices);
  const Counter& job_runs() const { return job_runs_; }

  // Scrape-time gauges, for the collector.
  Gauge& queue_depth() { return queue_depth_; }
  Gauge& jobs() { return jobs_; }
  Gauge& devices_busy() { return devices_busy_; }
  Gauge& watchers() { return watchers_; }
  Gauge& spool_used_bytes() { return spool_used_bytes_; }
  Gauge& spool_free_bytes() { return spool_free_bytes_; }
  Gauge& spool_degraded() { return spool_degraded_; }
  Gauge& device_memory_free_bytes() { return device_free_; }
  Gauge& device_memory_total_bytes() { return device_total_; }
  Gauge& device_utilization_ratio() { return device_utilization_; }
  Gauge& matrix_cache_bytes() { return matrix_cache_bytes_; }
  Gauge& matrix_cache_reused() { return matrix_cache_reused_; }
  Gauge& matrix_cache_built() { return matrix_cache_built_; }
  Gauge& kept_host_bytes() { return kept_host_bytes_; }

 private:
  MetricRegistry registry_;
  Counter& submitted_;
  Counter& finished_;
  Counter& requeued_;
  Counter& refused_;
  Counter& unauthenticated_;
  Histogram& stages_;
  Counter& upload_bytes_;
  Counter& fetch_bytes_;
  Counter& input_prefetch_;
  Counter& upload_followed_;
  Counter& input_pinned_bytes_;
  Counter& input_pin_failures_;
  Counter& job_runs_;
  Gauge& queue_depth_;
  Gauge& jobs_;
  Gauge& devices_busy_;
  Gauge& watchers_;
  Gauge& spool_used_bytes_;
  Gauge& spool_free_bytes_;
  Gauge& spool_degraded_;
  Gauge& device_free_;
  Gauge& device_total_;
  Gauge& device_utilization_;
  Gauge& matrix_cache_bytes_;
  Gauge& matrix_cache_reused_;
  Gauge& matrix_cache_built_;
  Gauge& kept_host_bytes_;
};

// "queued" for JOB_STATE_QUEUED: a state as metrics and logs name it.
std::string JobStateLabel(tomoserve::v1::JobState state);

}  // namespace tomo::server

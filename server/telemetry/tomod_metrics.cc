#include "server/telemetry/tomod_metrics.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"

namespace tomo::server {

namespace pb = ::tomoserve::v1;

namespace {

bool Unfinished(pb::JobState state) {
  return state == pb::JOB_STATE_UPLOADING || state == pb::JOB_STATE_QUEUED ||
         state == pb::JOB_STATE_RUNNING;
}

bool Terminal(pb::JobState state) {
  return state == pb::JOB_STATE_SUCCEEDED || state == pb::JOB_STATE_FAILED ||
         state == pb::JOB_STATE_CANCELLED;
}

// From 10 ms (a small fetch) to an hour (a large iterative run), about 2.5x apart.
std::vector<double> StageBounds() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 150, 300, 600, 1800, 3600};
}

const char* StageLabel(TomodMetrics::Stage stage) {
  switch (stage) {
    case TomodMetrics::Stage::kUpload:
      return "upload";
    case TomodMetrics::Stage::kQueueWait:
      return "queue_wait";
    case TomodMetrics::Stage::kRun:
      return "run";
    case TomodMetrics::Stage::kFetch:
      return "fetch";
  }
  return "unknown";
}

}  // namespace

std::string JobStateLabel(pb::JobState state) {
  const std::string& full = pb::JobState_Name(state);  // a static string, or "" when unknown
  absl::string_view name = full;
  absl::ConsumePrefix(&name, "JOB_STATE_");
  return name.empty() ? std::string("unknown") : absl::AsciiStrToLower(name);
}

TomodMetrics::TomodMetrics()
    : submitted_(
          registry_.AddCounter("tomod_jobs_submitted_total", "Jobs committed QUEUED by a Submit.")),
      finished_(registry_.AddCounter("tomod_jobs_finished_total", "Jobs that ended, by outcome.",
                                     {"outcome"})),
      requeued_(registry_.AddCounter(
          "tomod_jobs_requeued_total",
          "Runs handed back to the queue: by a drain (shutdown) or after a crash (restart).",
          {"reason"})),
      refused_(registry_.AddCounter("tomod_submits_refused_total",
                                    "Submits refused before any data was stored, by status code.",
                                    {"code"})),
      unauthenticated_(registry_.AddCounter(
          "tomod_calls_unauthenticated_total",
          "Calls refused as UNAUTHENTICATED: no, a malformed, an unknown or a revoked token, or "
          "a client certificate that names no tenant.")),
      stages_(registry_.AddHistogram("tomod_stage_duration_seconds",
                                     "Time a job spent in each stage of its way through tomod.",
                                     {"stage"}, StageBounds())),
      upload_bytes_(
          registry_.AddCounter("tomod_upload_bytes_total", "Projection bytes received by Submit.")),
      fetch_bytes_(
          registry_.AddCounter("tomod_fetch_bytes_total", "Result bytes sent by FetchResult.")),
      input_prefetch_(registry_.AddCounter(
          "tomod_input_prefetch_total",
          "Jobs whose input a worker found read ahead (hit) or read itself (miss), and inputs "
          "read ahead that were discarded unused (dropped).",
          {"outcome"})),
      upload_followed_(registry_.AddCounter(
          "tomod_upload_followed_total",
          "Uploads a worker reconstructed while they arrived, by outcome: used, given_up (the "
          "job ran from the spool), yielded (the worker was needed elsewhere), aborted.",
          {"outcome"})),
      input_pinned_bytes_(registry_.AddCounter(
          "tomod_input_pinned_bytes_total",
          "Bytes of inputs read ahead that were page-locked for the devices' copies.")),
      input_pin_failures_(registry_.AddCounter(
          "tomod_input_pin_failures_total",
          "Inputs read ahead whose page-locking failed (they were used unpinned).")),
      job_runs_(registry_.AddCounter(
          "tomod_job_runs_total",
          "Runs started, by the number of devices each ran on (more than 1 only with "
          "--multi_device_jobs).",
          {"devices"})),
      queue_depth_(registry_.AddGauge(
          "tomod_queue_depth", "Jobs queued or uploading (what --max_queue_length bounds).")),
      jobs_(registry_.AddGauge("tomod_jobs", "Jobs tomod holds, by state.", {"state"})),
      devices_busy_(registry_.AddGauge(
          "tomod_devices_busy",
          "Devices running a job (their worker's own or one of several devices of a job) or "
          "following an upload.")),
      watchers_(registry_.AddGauge("tomod_watchers", "WatchJob streams open.")),
      spool_used_bytes_(registry_.AddGauge(
          "tomod_spool_used_bytes",
          "Bytes of job files in the spool, uploads at their full size and unfinished jobs "
          "with their outputs reserved (--max_spool_bytes).")),
      spool_free_bytes_(registry_.AddGauge("tomod_spool_free_bytes",
                                           "Free bytes of the spool's file system.")),
      spool_degraded_(registry_.AddGauge(
          "tomod_spool_degraded",
          "1 while the spool's free space is below --min_free_spool_bytes: new jobs are "
          "refused, results are still served and jobs can be deleted.")),
      device_free_(registry_.AddGauge("tomod_device_memory_free_bytes",
                                      "Free memory of each worker's device (0: not reported).",
                                      {"device"})),
      device_total_(registry_.AddGauge("tomod_device_memory_total_bytes",
                                       "Total memory of each worker's device (0: not reported).",
                                       {"device"})),
      device_utilization_(registry_.AddGauge(
          "tomod_device_utilization_ratio",
          "Fraction of NVML's last sample period in which each worker's GPU ran a kernel "
          "(absent without NVML).",
          {"device"})),
      matrix_cache_bytes_(registry_.AddGauge(
          "tomod_matrix_cache_bytes",
          "Bytes of ART system matrices kept for later jobs (--matrix_cache_bytes).")),
      matrix_cache_reused_(registry_.AddGauge(
          "tomod_matrix_cache_reused", "art jobs since start that reused a kept matrix.")),
      matrix_cache_built_(registry_.AddGauge(
          "tomod_matrix_cache_built", "art jobs since start that built their matrix.")),
      kept_host_bytes_(registry_.AddGauge(
          "tomod_kept_host_bytes",
          "Bytes of freed large host arrays (volumes, projections) kept mapped, and page-locked "
          "once reused, for later arrays of the same size (--kept_host_memory_bytes).")) {
  // Series that exist from the start, so that rate() sees the first increment.
  submitted_.Add({}, 0);
  for (const char* outcome : {"succeeded", "failed", "cancelled"}) finished_.Add({outcome}, 0);
  upload_bytes_.Add({}, 0);
  fetch_bytes_.Add({}, 0);
  for (const char* outcome : {"hit", "miss", "dropped"}) input_prefetch_.Add({outcome}, 0);
  input_pinned_bytes_.Add({}, 0);
  input_pin_failures_.Add({}, 0);
  job_runs_.Add({"1"}, 0);
}

void TomodMetrics::StateChanged(pb::JobState from, pb::JobState to) {
  if (from == pb::JOB_STATE_UPLOADING && to == pb::JOB_STATE_QUEUED) submitted_.Add({});
  if (Unfinished(from) && Terminal(to)) finished_.Add({JobStateLabel(to)});
}

void TomodMetrics::Requeued(absl::string_view reason) { requeued_.Add({std::string(reason)}); }

void TomodMetrics::SubmitRefused(absl::string_view code) { refused_.Add({std::string(code)}); }

void TomodMetrics::Unauthenticated() { unauthenticated_.Add({}); }

void TomodMetrics::StageDone(Stage stage, double seconds) {
  stages_.Observe({StageLabel(stage)}, seconds);
}

void TomodMetrics::UploadBytes(uint64_t bytes) {
  upload_bytes_.Add({}, static_cast<double>(bytes));
}

void TomodMetrics::FetchBytes(uint64_t bytes) { fetch_bytes_.Add({}, static_cast<double>(bytes)); }

void TomodMetrics::InputPrefetch(absl::string_view outcome) {
  input_prefetch_.Add({std::string(outcome)});
}

void TomodMetrics::InputPinned(uint64_t bytes) {
  input_pinned_bytes_.Add({}, static_cast<double>(bytes));
}

void TomodMetrics::InputPinFailed() { input_pin_failures_.Add({}); }

void TomodMetrics::RunStarted(size_t devices) { job_runs_.Add({std::to_string(devices)}); }

void TomodMetrics::UploadFollowed(absl::string_view outcome) {
  upload_followed_.Add({std::string(outcome)});
}

}  // namespace tomo::server

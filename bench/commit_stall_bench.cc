// commit-stall-bench: how long reads of the job table (GetJob, ListJobs, a Watch's first
// event) wait while other jobs' records are being committed. Several threads submit small
// jobs as fast as JobManager takes them (each Submit's reply waits for its record to be
// durable); one thread meanwhile asks for one finished job, lists a page and opens a watch
// every millisecond, timing each call. Scheduling is paused: the jobs only queue.
//
// Run with the fsync shim to give every fsync a known cost:
//   TOMO_SLOW_FSYNC_US=20000 LD_PRELOAD=build/lib/libslow-fsync.so
//     build/bin/commit-stall-bench --submitters 4 --seconds 5
// Prints one JSON line: percentiles of each call's latency and the commits per second.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "core/algorithms/reconstruction.h"
#include "core/devices/devices.h"
#include "runner/checksum.h"
#include "server/jobs/job_manager.h"
#include "server/storage/spool.h"

namespace {

namespace pb = ::tomoserve::v1;
using Clock = std::chrono::steady_clock;

pb::JobSpec TinySpec(uint32_t detectors, uint32_t views) {
  pb::JobSpec spec;
  spec.set_name("commit stall");
  auto* geometry = spec.mutable_geometry()->mutable_parallel_2d();
  geometry->set_num_detectors(detectors);
  geometry->set_detector_spacing_mm(1.0);
  auto* angles = geometry->mutable_angles()->mutable_uniform();
  angles->set_count(views);
  angles->set_span_deg(180);
  spec.mutable_volume()->mutable_size()->set_x(16);
  spec.mutable_volume()->mutable_size()->set_y(16);
  spec.mutable_volume()->mutable_size()->set_z(1);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_x(1.0);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_y(1.0);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_z(1.0);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(uint64_t{views} * detectors * 4);
  spec.mutable_algorithm()->mutable_fbp();
  return spec;
}

// Records nothing: the watch is only opened and closed.
class NullWatcher final : public tomo::server::JobWatcher {
 public:
  bool Enqueue(const pb::JobEvent&) override { return false; }
  bool Close(const absl::Status&) override { return false; }
  void Flush() override {}
};

struct Latencies {
  std::vector<double> ms;
  std::string Summary() const {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    auto at = [&](double q) {
      return sorted.empty() ? 0.0 : sorted[std::min(sorted.size() - 1,
                                                    static_cast<size_t>(q * sorted.size()))];
    };
    return absl::StrFormat("{\"n\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f}",
                           sorted.size(), at(0.5), at(0.99), sorted.empty() ? 0.0 : sorted.back());
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"commit-stall-bench: job table reads while other jobs commit"};
  int submitters = 4;
  double seconds = 5;
  std::string dir = "/tmp/commit-stall-bench";
  app.add_option("--submitters", submitters, "threads submitting jobs")->check(CLI::Range(1, 64));
  app.add_option("--seconds", seconds, "how long to measure")->check(CLI::Range(0.1, 600.0));
  app.add_option("--dir", dir, "spool directory (emptied first)");
  CLI11_PARSE(app, argc, argv);

  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto spool = tomo::server::Spool::Open(dir);
  if (!spool.ok()) {
    std::fprintf(stderr, "%s\n", std::string(spool.status().message()).c_str());
    return 1;
  }
  const tomo::core::AlgorithmRegistry registry = tomo::core::AlgorithmRegistry::WithBuiltins();
  tomo::server::JobManagerOptions options;
  options.devices = {tomo::core::CpuDevice()};
  options.limits.max_queue_length = 1u << 30;
  options.limits.max_jobs_per_client = 0;  // one client submits them all
  options.prefetch_bytes = 0;
  tomo::server::JobManager manager(options, **spool, registry);
  manager.SetSchedulingPaused(true);
  if (absl::Status started = manager.Start(); !started.ok()) {
    std::fprintf(stderr, "%s\n", std::string(started.message()).c_str());
    return 1;
  }
  const pb::JobSpec spec = TinySpec(32, 32);
  const std::string input(spec.input().size_bytes(), '\0');
  const uint32_t crc = tomo::server::Crc32OfBuffer(input.data(), input.size());
  auto submit = [&]() -> absl::StatusOr<pb::Job> {
    auto upload = manager.BeginUpload(spec, "bench");
    if (!upload.ok()) return upload.status();
    auto room = (*upload)->Append(input);
    if (!room.ok()) return room.status();
    return (*upload)->Commit(input.size(), crc);
  };
  absl::StatusOr<pb::Job> probe = submit();
  if (!probe.ok()) {
    std::fprintf(stderr, "%s\n", std::string(probe.status().message()).c_str());
    return 1;
  }

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> commits{0}, refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < submitters; ++i) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        if (submit().ok()) {
          ++commits;
        } else {
          ++refused;
        }
      }
    });
  }
  Latencies get, list, watch;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  auto timed = [](Latencies& into, auto&& call) {
    const auto start = Clock::now();
    call();
    into.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  };
  pb::ListJobsRequest page;
  page.set_page_size(10);
  while (Clock::now() < end) {
    timed(get, [&] { (void)manager.GetJob(probe->id()); });
    timed(list, [&] { (void)manager.ListJobs(page); });
    NullWatcher watcher;
    timed(watch, [&] { (void)manager.Watch(probe->id(), &watcher); });
    manager.Unwatch(probe->id(), &watcher);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop = true;
  for (std::thread& thread : threads) thread.join();
  std::printf("{\"submitters\": %d, \"seconds\": %.1f, \"commits_per_s\": %.1f, \"refused\": %d, "
              "\"get_job\": %s, \"list_jobs\": %s, \"watch\": %s}\n",
              submitters, seconds, commits.load() / seconds, static_cast<int>(refused.load()),
              get.Summary().c_str(),
              list.Summary().c_str(), watch.Summary().c_str());
  manager.Shutdown();
  std::filesystem::remove_all(dir);
  return 0;
}

// tomod-bench: issue 4's benchmarks of a running tomod, from the client side (the C++
// client library over gRPC, as a user's program would do it).
//
//   large  one big job, FDK case 1 of the core issue (496 views of 960 x 1248, 2.38 GB of
//          float32, into a --fdk-side^3 volume over the same 256 mm field): the upload time
//          (until Submit returns: the data are fsynced and the job is committed), the time
//          from the Submit's start to each state change, the first progress event and the
//          "write results" event, and the total: from the Submit's start to the verified
//          result file, fetched with TomoClient::WatchAndFetch (started on "write results",
//          streamed from tomod's memory while it writes the file, ended once the job has
//          SUCCEEDED); with it the time from SUCCEEDED to the fetch's end and whether the
//          fetch started early. The download rate is measured apart, by --fetch-repeats
//          plain fetches of the published file after SUCCEEDED, each with the client's CPU
//          time (user, system) and minor page faults over it. Beside it, the floor of the spool's
//          disk: the same bytes written to a file in --spool-dir and fsynced (as tomod does).
//   many   --clients threads, each submitting --jobs small 2D jobs (128^2 from 180 views)
//          with a fresh idempotency key, then watching it to the end: jobs per second,
//          latency from the Submit's start to SUCCEEDED (p50, p99), and the check that no
//          job is lost (every one SUCCEEDED) or duplicated (tomod lists exactly the jobs
//          submitted, no id twice). The clients are one tenant, so tomod's
//          --max_uploads_per_client must be at least --clients (its default 16 refuses
//          uploads of 20 clients; scripts/device-*-bench pass 64).
//
//   build/bin/tomod-bench --server 127.0.0.1:50051 --work-dir /dev/shm/tb --spool-dir SPOOL
//       [--large] [--large-repeats 3] [--large-warmups 1] [--fetch-repeats 1]
//       [--download-streams 0] [--upload-streams 0] [--many] [--fdk-side 512] [--clients 20]
//       [--jobs 50] [--server-pid PID] [--json out.json]
//       [--tls-ca CA] [--tls-cert CERT --tls-key KEY] [--token-file FILE]
// With --tls-ca the client speaks TLS (mutual TLS with --tls-cert and --tls-key); with
// --token-file every call carries the bearer token (tomod's --tls_* and --tokens_file):
// scripts/device-tls-bench runs the large upload and the many clients that way beside
// plain text.
// Data files and downloads go to --work-dir (put it on tmpfs so that the client's own disk
// does not limit what is measured).
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/channel_security.h"
#include "client/tomo_client.h"
#include "transfer/allocator_tuning.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::bench {
namespace {

namespace fs = std::filesystem;
namespace v1 = tomoserve::v1;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Writes `bytes` of uniform random float32 in [0.25, 1.25) (a 4 MiB block, repeated) to
// path; fsyncs when asked. Returns the seconds the write (and fsync) took.
absl::StatusOr<double> WriteRandomFile(const std::string& path, uint64_t bytes, bool fsync,
                                       uint64_t seed) {
  std::vector<float> block(1 << 20);
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> uniform(0.25f, 1.25f);
  for (float& v : block) v = uniform(random);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot create ", path));
  const auto start = Clock::now();
  uint64_t done = 0;
  while (done < bytes) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes - done, block.size() * 4));
    const ssize_t written = ::write(fd, block.data(), n);
    if (written <= 0) {
      ::close(fd);
      return absl::InternalError(absl::StrCat("write to ", path, " failed after ", done, " bytes"));
    }
    done += static_cast<uint64_t>(written);
  }
  if (fsync && ::fsync(fd) != 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("fsync of ", path, " failed"));
  }
  const double seconds = Seconds(start);
  ::close(fd);
  return seconds;
}

void SetUniformAngles(v1::Angles* angles, uint32_t count, double span_deg) {
  angles->mutable_uniform()->set_count(count);
  angles->mutable_uniform()->set_start_deg(0);
  angles->mutable_uniform()->set_span_deg(span_deg);
}

void SetVolume(v1::Volume* volume, uint32_t xy, uint32_t z, double voxel_mm) {
  volume->mutable_size()->set_x(xy);
  volume->mutable_size()->set_y(xy);
  volume->mutable_size()->set_z(z);
  volume->mutable_voxel_size_mm()->set_x(voxel_mm);
  volume->mutable_voxel_size_mm()->set_y(voxel_mm);
  volume->mutable_voxel_size_mm()->set_z(voxel_mm);
}

// FDK case 1 of the core issue; the volume covers 256 mm at side^3.
v1::JobSpec FdkCase1Spec(uint32_t side) {
  v1::JobSpec spec;
  spec.set_name(absl::StrCat("tomod-bench large fdk case 1, ", side, "^3"));
  v1::ConeBeam* cone = spec.mutable_geometry()->mutable_cone();
  cone->mutable_detector()->set_rows(960);
  cone->mutable_detector()->set_columns(1248);
  cone->mutable_detector()->set_row_spacing_mm(0.32);
  cone->mutable_detector()->set_column_spacing_mm(0.32);
  cone->mutable_detector()->set_shape(v1::DETECTOR_SHAPE_FLAT);
  cone->set_source_origin_mm(780);
  cone->set_origin_detector_mm(420);
  SetUniformAngles(cone->mutable_angles(), 496, 360);
  SetVolume(spec.mutable_volume(), side, side, 256.0 / side);
  spec.mutable_input()->set_encoding(v1::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(uint64_t{496} * 960 * 1248 * 4);
  spec.mutable_algorithm()->mutable_fbp();
  spec.add_outputs(v1::OUTPUT_FORMAT_RAW_FLOAT32);
  return spec;
}

constexpr uint32_t kSmallViews = 180, kSmallDetectors = 185, kSmallSide = 128;

v1::JobSpec SmallSpec() {
  v1::JobSpec spec;
  spec.set_name("tomod-bench many");
  v1::ParallelBeam2D* parallel = spec.mutable_geometry()->mutable_parallel_2d();
  parallel->set_num_detectors(kSmallDetectors);
  parallel->set_detector_spacing_mm(1.0);
  SetUniformAngles(parallel->mutable_angles(), kSmallViews, 180);
  SetVolume(spec.mutable_volume(), kSmallSide, 1, 1.0);
  spec.mutable_input()->set_encoding(v1::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(uint64_t{kSmallViews} * kSmallDetectors * 4);
  spec.mutable_algorithm()->mutable_fbp();
  spec.add_outputs(v1::OUTPUT_FORMAT_RAW_FLOAT32);
  return spec;
}

bool Terminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

// The client process's CPU time and minor page faults so far (all its threads).
struct ProcessUsage {
  double user_s = 0, system_s = 0;
  long minor_faults = 0;

  static ProcessUsage Now() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    auto seconds = [](const timeval& t) { return t.tv_sec + 1e-6 * t.tv_usec; };
    return {seconds(usage.ru_utime), seconds(usage.ru_stime), usage.ru_minflt};
  }
  ProcessUsage Since(const ProcessUsage& before) const {
    return {user_s - before.user_s, system_s - before.system_s, minor_faults - before.minor_faults};
  }
};

// CPU seconds a process on this machine has used (/proc/PID/stat utime + stime), and the
// seconds the hypervisor took from this machine's CPUs (/proc/stat steal, all CPUs): a
// virtual machine whose host is busy runs everything slower, and this says so.
double ProcessCpuSeconds(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t after_name = text.rfind(')');
  if (after_name == std::string::npos) return 0;
  std::istringstream fields(text.substr(after_name + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int k = 3; k <= 15 && fields >> field; ++k) {  // fields 3.. of proc(5)
    if (k == 14) utime = std::stod(field);
    if (k == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double StolenCpuSeconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double user, nice, system, idle, iowait, irq, softirq, steal = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  return steal / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct PlainFetch {
  double seconds = 0;
  ProcessUsage usage;
  double server_cpu_s = 0;  // with --server-pid
  double stolen_s = 0;
};

struct LargeResult {
  // fetch_s: the median plain fetch after SUCCEEDED (the download rate); total_s: Submit start to
  // the early fetch's verified file; succeeded_to_fetched_s: from the SUCCEEDED event to
  // that fetch's end.
  double upload_s = 0, fetch_s = 0, total_s = 0, disk_write_fsync_s = 0;
  double succeeded_to_fetched_s = 0;
  std::vector<PlainFetch> fetches;
  bool fetch_started_early = false;
  uint64_t upload_bytes = 0, result_bytes = 0;
  std::vector<std::pair<std::string, double>> events;  // what, seconds since the Submit
};

absl::StatusOr<LargeResult> RunLarge(client::TomoClient& client, const std::string& work_dir,
                                     const std::string& spool_dir, uint32_t side, int fetch_repeats,
                                     int server_pid) {
  LargeResult r;
  const v1::JobSpec spec = FdkCase1Spec(side);
  r.upload_bytes = spec.input().size_bytes();
  const std::string data = (fs::path(work_dir) / "fdk1.raw").string();
  {
    absl::StatusOr<double> written = WriteRandomFile(data, r.upload_bytes, false, 1);
    if (!written.ok()) return written.status();
  }
  if (!spool_dir.empty()) {
    const std::string probe = (fs::path(spool_dir) / "tomod-bench-fsync-probe.raw").string();
    absl::StatusOr<double> written = WriteRandomFile(probe, r.upload_bytes, true, 2);
    fs::remove(probe);
    if (!written.ok()) return written.status();
    r.disk_write_fsync_s = *written;
  }
  const auto start = Clock::now();
  absl::StatusOr<v1::Job> job = client.Submit(spec, {data});
  if (!job.ok()) return job.status();
  r.upload_s = Seconds(start);
  r.events.push_back({"QUEUED (Submit returned)", r.upload_s});
  bool first_progress = true, writing = false;
  double succeeded_at = 0;
  v1::JobState last = job->state();
  const std::string out = (fs::path(work_dir) / "fdk1-volume.raw").string();
  fs::remove(out);
  // Watched, and the result fetched as soon as tomod writes it (on another thread).
  absl::StatusOr<client::WatchedFetch> early = client.WatchAndFetch(
      job->id(), "", out,
      [&](const v1::JobEvent& event) {
        if (event.has_progress() && first_progress) {
          first_progress = false;
          r.events.push_back(
              {absl::StrCat("first progress (", event.progress().stage(), ")"), Seconds(start)});
        }
        if (!writing && event.state() == v1::JOB_STATE_RUNNING &&
            event.progress().stage() == client::kWriteResultsStage) {
          writing = true;
          r.events.push_back({"write results (the fetch starts)", Seconds(start)});
        }
        if (event.state() != last && event.state() != v1::JOB_STATE_UNSPECIFIED) {
          last = event.state();
          r.events.push_back({v1::JobState_Name(last), Seconds(start)});
          if (last == v1::JOB_STATE_SUCCEEDED) succeeded_at = Seconds(start);
        }
      },
      /*resume=*/false);
  if (!early.ok()) return early.status();
  r.total_s = Seconds(start);
  if (early->job.state() != v1::JOB_STATE_SUCCEEDED || !early->file.has_value()) {
    return absl::InternalError(absl::StrCat("job ", job->id(), " ended ",
                                            v1::JobState_Name(early->job.state()), ": ",
                                            early->job.error()));
  }
  r.events.push_back({"result fetched and verified", r.total_s});
  r.fetch_started_early = early->started_early;
  r.succeeded_to_fetched_s = r.total_s - succeeded_at;
  fs::remove(out);
  // The download rate: plain fetches of the published file.
  for (int k = 0; k < fetch_repeats; ++k) {
    const ProcessUsage usage_before = ProcessUsage::Now();
    const double server_before = server_pid > 0 ? ProcessCpuSeconds(server_pid) : 0;
    const double stolen_before = StolenCpuSeconds();
    const auto fetch_start = Clock::now();
    absl::StatusOr<v1::ResultFile> file = client.Fetch(job->id(), "", out, /*resume=*/false);
    if (!file.ok()) return file.status();
    PlainFetch fetch;
    fetch.seconds = Seconds(fetch_start);
    fetch.usage = ProcessUsage::Now().Since(usage_before);
    if (server_pid > 0) fetch.server_cpu_s = ProcessCpuSeconds(server_pid) - server_before;
    fetch.stolen_s = StolenCpuSeconds() - stolen_before;
    r.fetches.push_back(fetch);
    r.result_bytes = file->size_bytes();
    fs::remove(out);
  }
  std::vector<double> fetch_seconds;
  for (const PlainFetch& fetch : r.fetches) fetch_seconds.push_back(fetch.seconds);
  std::sort(fetch_seconds.begin(), fetch_seconds.end());
  r.fetch_s = fetch_seconds[fetch_seconds.size() / 2];
  fs::remove(data);
  if (absl::Status deleted = client.Delete(job->id()); !deleted.ok()) return deleted;
  return r;
}

struct ManyResult {
  int jobs = 0, succeeded = 0, listed = 0, distinct_ids = 0;
  double wall_s = 0, p50_s = 0, p99_s = 0, max_s = 0;
  std::string first_error;
};

absl::StatusOr<ManyResult> RunMany(client::TomoClient& client, const std::string& work_dir,
                                   int clients, int jobs_per_client) {
  const std::string data = (fs::path(work_dir) / "small.raw").string();
  v1::JobSpec base = SmallSpec();
  if (absl::StatusOr<double> w = WriteRandomFile(data, base.input().size_bytes(), false, 3);
      !w.ok()) {
    return w.status();
  }
  const std::string run = absl::StrCat(std::random_device{}());
  base.set_name(absl::StrCat("tomod-bench many ", run));
  std::mutex mu;
  std::vector<double> latencies;
  std::vector<std::string> ids;
  ManyResult r;
  r.jobs = clients * jobs_per_client;
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (int j = 0; j < jobs_per_client; ++j) {
        v1::JobSpec spec = base;
        spec.set_idempotency_key(absl::StrCat(run, "-", c, "-", j));
        const auto t0 = Clock::now();
        absl::StatusOr<v1::Job> job = client.Submit(spec, {data});
        absl::Status status = job.status();
        v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
        if (status.ok()) {
          status = client.Watch(job->id(), [&](const v1::JobEvent& e) {
            if (Terminal(e.state())) state = e.state();
          });
        }
        const double latency = Seconds(t0);
        std::lock_guard<std::mutex> lock(mu);
        if (!status.ok() && r.first_error.empty()) r.first_error = status.ToString();
        if (status.ok()) ids.push_back(job->id());
        if (status.ok() && state == v1::JOB_STATE_SUCCEEDED) {
          ++r.succeeded;
          latencies.push_back(latency);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  r.wall_s = Seconds(start);
  std::sort(latencies.begin(), latencies.end());
  if (!latencies.empty()) {
    r.p50_s = latencies[latencies.size() / 2];
    r.p99_s = latencies[std::min(latencies.size() - 1, latencies.size() * 99 / 100)];
    r.max_s = latencies.back();
  }
  absl::StatusOr<std::vector<v1::Job>> listed = client.ListJobs();
  if (!listed.ok()) return listed.status();
  std::set<std::string> distinct;
  for (const v1::Job& job : *listed) {
    if (job.spec().name() != base.name()) continue;
    ++r.listed;
    distinct.insert(job.id());
  }
  r.distinct_ids = static_cast<int>(distinct.size());
  for (const std::string& id : distinct) {
    if (absl::Status deleted = client.Delete(id); !deleted.ok() && r.first_error.empty()) {
      r.first_error = deleted.ToString();
    }
  }
  fs::remove(data);
  return r;
}

int Main(int argc, char** argv) {
  CLI::App app{"tomod-bench: upload, download, end-to-end and many-client timings of tomod"};
  std::string server = "127.0.0.1:50051", work_dir = "/tmp/tomod-bench", spool_dir, json_path;
  bool large = false, many = false;
  uint32_t fdk_side = 512;
  int clients = 20, jobs = 50, large_repeats = 3, large_warmups = 1, fetch_repeats = 1,
      download_streams = 0, upload_streams = 0, server_pid = 0;
  app.add_option("--server", server, "tomod's address");
  app.add_option("--work-dir", work_dir, "where data files and downloads go (tmpfs advised)");
  app.add_option("--spool-dir", spool_dir,
                 "tomod's spool directory: its disk's write+fsync rate is measured there");
  app.add_flag("--large", large, "the large FDK job");
  app.add_flag("--many", many, "many clients with small jobs");
  app.add_option("--fdk-side", fdk_side, "volume side of the large job")
      ->check(CLI::Range(16u, 2048u));
  app.add_option("--large-repeats", large_repeats,
                 "runs of the large job; the summary gives their medians (one virtual machine "
                 "varies by tens of percent from run to run)")
      ->check(CLI::Range(1, 100));
  app.add_option("--large-warmups", large_warmups,
                 "runs of the large job before the measured ones, printed but left out of the "
                 "medians: a fresh tomod's and client's first upload is 20-40% slower (heaps, "
                 "connection windows and the device still growing)")
      ->check(CLI::Range(0, 100));
  app.add_option("--fetch-repeats", fetch_repeats,
                 "plain fetches of each large run's result; its download rate is their median")
      ->check(CLI::Range(1, 100));
  app.add_option("--server-pid", server_pid,
                 "tomod's process id, when it runs on this machine: each plain fetch then "
                 "reports tomod's CPU time too");
  app.add_option("--download-streams", download_streams,
                 "striped streams of each fetch (ClientOptions::download_streams; 0, the "
                 "default: automatic)")
      ->check(CLI::Range(0, client::kMaxDownloadStreams));
  app.add_option("--upload-streams", upload_streams,
                 "striped streams of each large upload (ClientOptions::upload_streams; 0, the "
                 "default: automatic)")
      ->check(CLI::Range(0, client::kMaxUploadStreams));
  app.add_option("--clients", clients, "client threads")->check(CLI::Range(1, 1000));
  app.add_option("--jobs", jobs, "jobs per client")->check(CLI::Range(1, 100000));
  app.add_option("--json", json_path, "write the results as JSON here");
  std::string tls_ca, tls_cert, tls_key, token_file;
  app.add_option("--tls-ca", tls_ca, "speak TLS, trusting this PEM CA for tomod's certificate");
  app.add_option("--tls-cert", tls_cert, "PEM client certificate (mutual TLS)");
  app.add_option("--tls-key", tls_key, "PEM key of --tls-cert");
  app.add_option("--token-file", token_file, "a file holding the bearer token to send");
  CLI11_PARSE(app, argc, argv);
  std::error_code error;
  fs::create_directories(work_dir, error);
  client::ClientOptions client_options;
  client_options.download_streams = download_streams;
  client_options.upload_streams = upload_streams;
  if (!tls_ca.empty() || !tls_cert.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        client::MakeChannelCredentials({tls_ca, tls_cert, tls_key});
    if (!credentials.ok()) {
      std::fprintf(stderr, "tomod-bench: %s\n", credentials.status().ToString().c_str());
      return 2;
    }
    client_options.credentials = *credentials;
  }
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = client::ReadTokenFile(token_file);
    if (!token.ok()) {
      std::fprintf(stderr, "tomod-bench: %s\n", token.status().ToString().c_str());
      return 2;
    }
    client_options.bearer_token = *token;
  }
  std::printf("connection: %s%s\n",
              client_options.credentials ? (tls_cert.empty() ? "TLS" : "mutual TLS")
                                         : "plain text",
              client_options.bearer_token.empty() ? "" : ", bearer token");
  client::TomoClient client(server, client_options);
  std::string json = "{";
  if (large) {
    std::vector<LargeResult> runs, warmups;
    for (int run = -large_warmups; run < large_repeats; ++run) {
      absl::StatusOr<LargeResult> r =
          RunLarge(client, work_dir, spool_dir, fdk_side, fetch_repeats, server_pid);
      if (!r.ok()) {
        std::fprintf(stderr, "tomod-bench: large: %s\n", r.status().ToString().c_str());
        return 1;
      }
      // Warm-up runs print as "run -1" etc. and stay out of the medians.
      const double gb_in = static_cast<double>(r->upload_bytes) * 1e-9;
      const double gb_out = static_cast<double>(r->result_bytes) * 1e-9;
      std::printf("large: run %d: upload %.2f GB in %.3f s (%.2f GB/s, until committed)\n", run,
                  gb_in, r->upload_s, gb_in / r->upload_s);
      if (r->disk_write_fsync_s > 0) {
        std::printf(
            "large: run %d: the spool's disk, the same bytes written and fsynced: %.3f s "
            "(%.2f GB/s); tomod's upload reaches %.0f%% of it\n",
            run, r->disk_write_fsync_s, gb_in / r->disk_write_fsync_s,
            100.0 * r->disk_write_fsync_s / r->upload_s);
      }
      for (const auto& [what, at] : r->events) {
        std::printf("large: run %d:   %-40s %.3f s\n", run, what.c_str(), at);
      }
      std::printf(
          "large: run %d: total %.3f s = upload + %.3f s (the fetch %s, ending %.3f s "
          "after SUCCEEDED); plain download after SUCCEEDED %.2f GB in %.3f s "
          "(%.2f GB/s)\n",
          run, r->total_s, r->total_s - r->upload_s,
          r->fetch_started_early ? "started on write results" : "started after SUCCEEDED",
          r->succeeded_to_fetched_s, gb_out, r->fetch_s, gb_out / r->fetch_s);
      for (size_t k = 0; k < r->fetches.size(); ++k) {
        const PlainFetch& fetch = r->fetches[k];
        std::printf(
            "large: run %d:   plain fetch %zu: %.3f s (%.2f GB/s); client CPU user %.3f s, "
            "system %.3f s, minor faults %ld; tomod CPU %.2f s; stolen %.2f s\n",
            run, k, fetch.seconds, gb_out / fetch.seconds, fetch.usage.user_s, fetch.usage.system_s,
            fetch.usage.minor_faults, fetch.server_cpu_s, fetch.stolen_s);
      }
      (run < 0 ? warmups : runs).push_back(*r);
    }
    auto median = [&runs](double LargeResult::*field) {
      std::vector<double> values;
      for (const LargeResult& r : runs) values.push_back(r.*field);
      std::sort(values.begin(), values.end());
      return values[values.size() / 2];
    };
    const double gb_in = static_cast<double>(runs[0].upload_bytes) * 1e-9;
    const double gb_out = static_cast<double>(runs[0].result_bytes) * 1e-9;
    const double upload_s = median(&LargeResult::upload_s);
    const double fetch_s = median(&LargeResult::fetch_s);
    const double total_s = median(&LargeResult::total_s);
    const double floor_s = median(&LargeResult::disk_write_fsync_s);
    const double after_succeeded_s = median(&LargeResult::succeeded_to_fetched_s);
    int early_runs = 0;
    for (const LargeResult& r : runs) early_runs += r.fetch_started_early ? 1 : 0;
    std::printf(
        "large: median of %d runs: upload %.2f GB/s (the spool's write+fsync %.2f GB/s, "
        "%.0f%%), download %.2f GB/s, total %.3f s = upload + %.3f s; the result "
        "fetched %.3f s after SUCCEEDED (%d of %d fetches started early)\n",
        large_repeats, gb_in / upload_s, floor_s > 0 ? gb_in / floor_s : 0.0,
        floor_s > 0 ? 100.0 * floor_s / upload_s : 0.0, gb_out / fetch_s, total_s,
        total_s - upload_s, after_succeeded_s, early_runs, large_repeats);
    absl::StrAppend(&json, "\"large\": {\"upload_bytes\": ", runs[0].upload_bytes,
                    ", \"upload_s\": ", upload_s, ", \"disk_write_fsync_s\": ", floor_s,
                    ", \"result_bytes\": ", runs[0].result_bytes, ", \"fetch_s\": ", fetch_s,
                    ", \"total_s\": ", total_s, ", \"succeeded_to_fetched_s\": ", after_succeeded_s,
                    ", \"early_fetches\": ", early_runs);
    for (const auto& [key, list] : {std::pair{"runs", &runs}, std::pair{"warmups", &warmups}}) {
      absl::StrAppend(&json, ", \"", key, "\": [");
      for (size_t i = 0; i < list->size(); ++i) {
        const LargeResult& r = (*list)[i];
        absl::StrAppend(&json, i ? ", " : "", "{\"upload_s\": ", r.upload_s,
                        ", \"disk_write_fsync_s\": ", r.disk_write_fsync_s,
                        ", \"fetch_s\": ", r.fetch_s, ", \"total_s\": ", r.total_s,
                        ", \"succeeded_to_fetched_s\": ", r.succeeded_to_fetched_s,
                        ", \"fetch_started_early\": ", r.fetch_started_early ? "true" : "false",
                        ", \"fetches\": [");
        for (size_t k = 0; k < r.fetches.size(); ++k) {
          const PlainFetch& fetch = r.fetches[k];
          absl::StrAppend(
              &json, k ? ", " : "", "{\"s\": ", fetch.seconds, ", \"user_s\": ", fetch.usage.user_s,
              ", \"system_s\": ", fetch.usage.system_s,
              ", \"minor_faults\": ", fetch.usage.minor_faults,
              ", \"server_cpu_s\": ", fetch.server_cpu_s, ", \"stolen_s\": ", fetch.stolen_s, "}");
        }
        absl::StrAppend(&json, "]}");
      }
      absl::StrAppend(&json, "]");
    }
    absl::StrAppend(&json, "}");
  }
  if (many) {
    absl::StatusOr<ManyResult> r = RunMany(client, work_dir, clients, jobs);
    if (!r.ok()) {
      std::fprintf(stderr, "tomod-bench: many: %s\n", r.status().ToString().c_str());
      return 1;
    }
    std::printf(
        "many: %d clients x %d jobs: %d succeeded in %.2f s (%.1f jobs/s); latency "
        "p50 %.3f s, p99 %.3f s, max %.3f s; listed %d, distinct ids %d%s%s\n",
        clients, jobs, r->succeeded, r->wall_s, r->succeeded / r->wall_s, r->p50_s, r->p99_s,
        r->max_s, r->listed, r->distinct_ids,
        r->first_error.empty() ? "" : "; first error: ", r->first_error.c_str());
    absl::StrAppend(&json, large ? ", " : "", "\"many\": {\"clients\": ", clients,
                    ", \"jobs_per_client\": ", jobs, ", \"succeeded\": ", r->succeeded,
                    ", \"wall_s\": ", r->wall_s, ", \"p50_s\": ", r->p50_s,
                    ", \"p99_s\": ", r->p99_s, ", \"listed\": ", r->listed,
                    ", \"distinct_ids\": ", r->distinct_ids, "}");
    if (r->succeeded != r->jobs || r->listed != r->jobs || r->distinct_ids != r->jobs) {
      std::fprintf(stderr, "tomod-bench: many: jobs lost or duplicated\n");
      return 1;
    }
  }
  absl::StrAppend(&json, "}\n");
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}

}  // namespace
}  // namespace tomo::bench

int main(int argc, char** argv) {
  tomo::transfer::KeepTransferBuffersInTheHeap();  // as the tomo CLI does
  return tomo::bench::Main(argc, argv);
}

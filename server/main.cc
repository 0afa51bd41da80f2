// tomod: the tomoserve reconstruction daemon. Parses flags and calls RunServer().
// --help (-h, --helpfull) prints tomod's own flags grouped by concern and exits 0;
// --version prints the version and build (core/base/build_info.h) and exits 0.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "core/base/build_info.h"
#include "core/data/host_block_pool.h"
#include "server/tomod_server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "address to serve gRPC on, host:port (port 0 picks a free one) or unix:path; "
          "plain text is allowed only on loopback unless --allow_insecure_remote");
ABSL_FLAG(std::string, port_file, "",
          "if set, write the bound port there (atomically) once the server listens");
ABSL_FLAG(std::string, spool_dir, "/var/lib/tomoserve/spool",
          "directory for uploaded projections and results; created if missing");
ABSL_FLAG(std::vector<std::string>, devices, {},
          "comma-separated ids of the devices to run jobs on, one worker each, e.g. "
          "cuda:0,cuda:1 or cpu (tomo info lists them); cpu:1, cpu:2, ... are more CPU "
          "workers sharing the host's cores; empty: every GPU, or the CPU when there is none");
ABSL_FLAG(bool, cpu_worker, false,
          "also run jobs on the CPU when there are GPUs (without a GPU the CPU is always used)");
ABSL_FLAG(uint64_t, max_upload_bytes, uint64_t{16} << 30, "largest accepted upload, in bytes");
ABSL_FLAG(uint64_t, max_voxels, uint64_t{1} << 32, "largest accepted volume, in voxels");
ABSL_FLAG(uint32_t, max_views, 100000, "most projection views a job may have");
ABSL_FLAG(uint32_t, max_queue_length, 1000,
          "most jobs queued or uploading at once; more are refused with RESOURCE_EXHAUSTED");
ABSL_FLAG(uint32_t, max_jobs_per_client, 250,
          "most unfinished jobs (uploading, queued or running) one client may have; more are "
          "refused with RESOURCE_EXHAUSTED. A client is the tenant of an authenticated call "
          "(token or client certificate), else the host of its address (without "
          "authentication, a client that changes address escapes it). The default, a quarter "
          "of --max_queue_length's default, keeps one client from filling the queue; 0: no "
          "limit");
ABSL_FLAG(uint32_t, tenant_max_unfinished_jobs, 0,
          "most unfinished jobs (uploading, queued or running) one tenant may have; more are "
          "refused with RESOURCE_EXHAUSTED naming the quota; 0: no limit");
ABSL_FLAG(uint64_t, tenant_max_spool_bytes, 0,
          "most spool bytes one tenant's jobs may hold or reserve (inputs, results, what "
          "uploads in progress have reserved, outputs' bound until a job ends); a job whose "
          "input and outputs would take it over is refused with RESOURCE_EXHAUSTED naming the "
          "quota; 0: no limit");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM server certificate (chain) for TLS; with --tls_key_file, tomod speaks TLS only "
          "(see docs/security.md; scripts/dev-certs makes development ones); read again, with "
          "the key and client CA, on SIGHUP");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA certificate(s): when set, every client must present a certificate signed by "
          "it (mutual TLS); its subject CN names the caller's tenant when no token is sent");
ABSL_FLAG(std::string, tokens_file, "",
          "file of bearer tokens, one 'TOKEN TENANT ROLE' a line (role user or admin; '#' "
          "comments), readable by its owner (and group) only; when set, every RPC but health "
          "needs 'authorization: Bearer <token>' metadata. Read again on SIGHUP (a bad file "
          "keeps the tokens in force)");
ABSL_FLAG(uint32_t, max_uploads_per_client, 16,
          "most uploads (Submit calls before upload_end) one client may have in progress; more "
          "are refused with RESOURCE_EXHAUSTED. A client as for --max_jobs_per_client; 0: no "
          "limit");
ABSL_FLAG(absl::Duration, upload_idle_timeout, absl::Minutes(2),
          "an upload whose client sends nothing for this long while tomod waits for its next "
          "message is ended (DEADLINE_EXCEEDED) and its job removed, releasing its room on "
          "the spool; 0: never");
ABSL_FLAG(uint32_t, max_iterations, 1000,
          "most iterations an iterative algorithm may be asked for; more are refused with "
          "INVALID_ARGUMENT, as an absurd count is a wrong spec (FBP/FDK have none)");
ABSL_FLAG(uint64_t, memory_budget_bytes, 0,
          "most device memory one job may use, in bytes; 0: the device's free memory. A job "
          "that does not fit is reconstructed in z-slabs that do; a job's "
          "JobSpec.memory_budget_bytes may lower it further");
ABSL_FLAG(uint64_t, matrix_cache_bytes, 2ull << 30,
          "host memory for ART's built system matrices, kept (least recently used dropped "
          "first) so that a later job of the same scan and grid skips the build; 0: keep none");
ABSL_FLAG(int64_t, kept_host_memory_bytes, -1,
          "host memory kept mapped, once a job's large arrays are freed, for the next arrays "
          "of the same size (a reused volume is also page-locked once, so that devices "
          "download into it directly); -1: an eighth of the machine's memory; 0: keep none");
ABSL_FLAG(uint32_t, max_attempts, 3,
          "most runs of one job: a job whose run a crash of tomod interrupted runs again at "
          "the next start until it has started this often, then ends FAILED");
ABSL_FLAG(absl::Duration, result_ttl, absl::ZeroDuration(),
          "finished jobs (record, input and results) are deleted this long after they ended, "
          "e.g. 24h or 30m; 0 keeps them until DeleteJob");
ABSL_FLAG(uint64_t, max_spool_bytes, 0,
          "uploads that would bring the spool's job files (inputs and results, uploads in "
          "progress at their full size) over this many bytes are refused with "
          "RESOURCE_EXHAUSTED; 0: no limit");
ABSL_FLAG(uint64_t, prefetch_bytes, tomo::server::kDefaultPrefetchBytes,
          "while a worker runs a job, the input of the job queued next is read and checked "
          "in the background (one per worker), so the device does not wait for the spool "
          "between jobs; at most this many bytes of such inputs are held; 0: off");
ABSL_FLAG(std::string, reconstruct_while_uploading, "devices",
          "FBP/FDK jobs whose input is plain float32 projections are reconstructed while they "
          "are uploaded, by an idle worker: devices (GPU workers), all (the CPU worker too; "
          "no gain there) or never");
ABSL_FLAG(std::string, multi_device_jobs, "off",
          "off: every job runs on one device. idle: a job of at least "
          "--multi_device_min_voxels voxels whose algorithm splits its work over devices "
          "(today FDK: fbp on a cone-beam or vector geometry) also takes the other devices of "
          "its kind that are idle when it starts, less one for each job still queued; it keeps "
          "them until it ends and never waits for more (docs/architecture.md, The scheduler)");
ABSL_FLAG(uint64_t, multi_device_min_voxels, tomo::server::kDefaultMultiDeviceMinVoxels,
          "smallest volume, in voxels (x * y * z), of a job that --multi_device_jobs=idle lets "
          "take several devices; the default, 512^3, keeps jobs that one GPU finishes in "
          "moments on one device (each further device first needs its own copy of the "
          "projections)");
ABSL_FLAG(int32_t, metrics_port, tomo::server::kDefaultMetricsPort,
          "serve Prometheus metrics at http://<--metrics_host>:<port>/metrics; 0: off");
ABSL_FLAG(std::string, metrics_host, "127.0.0.1",
          "address the metrics endpoint binds (IPv4, IPv6 or localhost); plain HTTP, so a "
          "non-loopback one needs --allow_insecure_remote");
ABSL_FLAG(std::string, metrics_token_file, "",
          "file holding a token that scrapes must send as 'Authorization: Bearer <token>' "
          "(readable by its owner and group only); empty: none");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(30),
          "on SIGTERM/SIGINT: health turns NOT_SERVING and new jobs are refused at once; "
          "running jobs get this long to finish, then they are stopped and queued again "
          "(durably, not counted as an attempt) to run after the restart. A second signal "
          "ends the wait at once. The whole stop takes at most this + 10 s: a supervisor's "
          "stop timeout must be longer (deploy/README.md)");
ABSL_FLAG(uint64_t, min_free_spool_bytes, uint64_t{64} << 20,
          "free bytes kept on the spool's file system (job database, logs) beyond what "
          "accepted jobs will write; below it new jobs are refused (degraded: health "
          "NOT_SERVING for tomoserve.v1.Reconstruction.admission) while results are served "
          "and jobs can be deleted");
ABSL_FLAG(uint64_t, spool_reserve_bytes, uint64_t{32} << 20,
          "bytes pre-allocated in <spool>/reserve and given back when the disk is full, so "
          "that tomod can still start, delete jobs and record their ends; 0: none");
ABSL_FLAG(std::string, testing_crash_on_job_name, "",
          "for tests only: a job with this name aborts tomod from its worker, as a fault in "
          "a reconstruction would (the crash log then names it; see docs/limits.md)");
ABSL_FLAG(bool, allow_insecure_remote, false,
          "serve plain-text gRPC on a non-loopback --listen address without TLS, and the "
          "metrics on a non-loopback --metrics_host");

namespace {

constexpr char kUsage[] =
    "tomod: the tomoserve reconstruction daemon.\n"
    "  tomod --listen=127.0.0.1:50051 --spool_dir=/var/lib/tomoserve/spool";

// The help's groups, in the order printed: a flag goes to the first group that names it or
// whose prefix it has; flags of no group go under "Other".
struct FlagGroup {
  const char* title;
  std::vector<std::string> names;
  std::vector<std::string> prefixes;
};

const std::vector<FlagGroup>& FlagGroups() {
  static const auto* groups = new std::vector<FlagGroup>{
      {"Serving", {"listen", "port_file", "allow_insecure_remote", "metrics_port"}, {}},
      {"Security", {}, {"tls", "token", "tenant"}},
      {"Devices and memory",
       {"devices", "cpu_worker", "memory_budget_bytes", "matrix_cache_bytes", "prefetch_bytes",
        "kept_host_memory_bytes", "reconstruct_while_uploading", "multi_device_jobs",
        "multi_device_min_voxels"},
       {}},
      {"Limits", {"max_attempts"}, {"max_upload", "max_voxels", "max_views", "max_queue",
                                    "max_jobs", "max_iterations"}},
      {"Spool and retention",
       {"spool_dir", "result_ttl", "max_spool_bytes", "min_free_spool_bytes",
        "spool_reserve_bytes"},
       {}},
      {"Shutdown", {"drain_timeout"}, {}},
      {"Testing", {}, {"testing_"}},
  };
  return *groups;
}

std::string GroupOf(const std::string& name) {
  for (const FlagGroup& group : FlagGroups()) {
    if (std::find(group.names.begin(), group.names.end(), name) != group.names.end()) {
      return group.title;
    }
  }
  for (const FlagGroup& group : FlagGroups()) {
    for (const std::string& prefix : group.prefixes) {
      if (absl::StartsWith(name, prefix)) return group.title;
    }
  }
  return "Other";
}

// Words of text wrapped at width, every line indented.
std::string Wrapped(const std::string& text, size_t indent, size_t width) {
  std::string out, line(indent, ' ');
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (line.size() > indent && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line.assign(indent, ' ');
    }
    if (line.size() > indent) line += ' ';
    line.append(word.data(), word.size());
  }
  return out + line + "\n";
}

// tomod's own flags (not the Abseil library's), grouped, each with its default.
void PrintHelp() {
  std::map<std::string, std::vector<const absl::CommandLineFlag*>> by_group;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), "absl/")) continue;
    by_group[GroupOf(std::string(flag->Name()))].push_back(flag);
  }
  std::string text = std::string(kUsage) + "\n";
  std::vector<std::string> titles;
  for (const FlagGroup& group : FlagGroups()) titles.push_back(group.title);
  titles.push_back("Other");
  for (const std::string& title : titles) {
    auto found = by_group.find(title);
    if (found == by_group.end()) continue;
    std::vector<const absl::CommandLineFlag*>& flags = found->second;
    std::sort(flags.begin(), flags.end(),
              [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
    text += "\n" + title + ":\n";
    for (const absl::CommandLineFlag* flag : flags) {
      const std::string value = flag->DefaultValue();
      text += "  --" + std::string(flag->Name()) + " (default: " + (value.empty() ? "\"\"" : value) + ")\n";
      text += Wrapped(flag->Help(), 6, 88);
    }
  }
  text +=
      "\nFlags are --name=value or --name value; booleans also --name and --noname.\n"
      "--version prints the version and build.\n";
  std::fputs(text.c_str(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
  // Help and version first, by tomod itself: Abseil's --help lists only the flags of a file
  // named after the program, and its --helpfull mixes in the library's own flags.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpfull" ||
        arg == "--helpshort") {
      PrintHelp();
      return 0;
    }
    if (arg == "--version" || arg == "-version") {
      std::printf("tomod %s\n", tomo::core::BuildDescription().c_str());
      return 0;
    }
  }
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr, "tomod: unexpected argument \"%s\"; tomod takes only flags\n", rest[1]);
    return 2;
  }
  tomo::server::ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  options.spool_dir = absl::GetFlag(FLAGS_spool_dir);
  options.device_ids = absl::GetFlag(FLAGS_devices);
  options.cpu_worker = absl::GetFlag(FLAGS_cpu_worker);
  options.allow_insecure_remote = absl::GetFlag(FLAGS_allow_insecure_remote);
  options.tls.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  options.tls.key_file = absl::GetFlag(FLAGS_tls_key_file);
  options.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  options.tokens_file = absl::GetFlag(FLAGS_tokens_file);
  options.tenant_max_unfinished_jobs = absl::GetFlag(FLAGS_tenant_max_unfinished_jobs);
  options.tenant_max_spool_bytes = absl::GetFlag(FLAGS_tenant_max_spool_bytes);
  options.limits.max_upload_bytes = absl::GetFlag(FLAGS_max_upload_bytes);
  options.limits.max_voxels = absl::GetFlag(FLAGS_max_voxels);
  options.limits.max_views = absl::GetFlag(FLAGS_max_views);
  options.limits.max_queue_length = absl::GetFlag(FLAGS_max_queue_length);
  options.limits.max_jobs_per_client = absl::GetFlag(FLAGS_max_jobs_per_client);
  options.max_uploads_per_client = absl::GetFlag(FLAGS_max_uploads_per_client);
  options.upload_idle_timeout = absl::GetFlag(FLAGS_upload_idle_timeout);
  options.limits.max_iterations = absl::GetFlag(FLAGS_max_iterations);
  options.memory_budget_bytes = absl::GetFlag(FLAGS_memory_budget_bytes);
  options.matrix_cache_bytes = absl::GetFlag(FLAGS_matrix_cache_bytes);
  options.max_attempts = absl::GetFlag(FLAGS_max_attempts);
  options.result_ttl = absl::GetFlag(FLAGS_result_ttl);
  options.max_spool_bytes = absl::GetFlag(FLAGS_max_spool_bytes);
  options.prefetch_bytes = absl::GetFlag(FLAGS_prefetch_bytes);
  const std::string while_uploading = absl::GetFlag(FLAGS_reconstruct_while_uploading);
  if (while_uploading == "devices") {
    options.reconstruct_while_uploading = tomo::server::WhileUploading::kOnDevices;
  } else if (while_uploading == "all") {
    options.reconstruct_while_uploading = tomo::server::WhileUploading::kOnAnyWorker;
  } else if (while_uploading == "never") {
    options.reconstruct_while_uploading = tomo::server::WhileUploading::kNever;
  } else {
    std::fprintf(stderr,
                 "tomod: --reconstruct_while_uploading: \"%s\" is not one of devices, all, "
                 "never\n",
                 while_uploading.c_str());
    return 2;
  }
  absl::StatusOr<tomo::server::MultiDeviceJobs> multi_device =
      tomo::server::ParseMultiDeviceJobs(absl::GetFlag(FLAGS_multi_device_jobs));
  if (!multi_device.ok()) {
    std::fprintf(stderr, "tomod: %s\n", std::string(multi_device.status().message()).c_str());
    return 2;
  }
  options.multi_device.mode = *multi_device;
  options.multi_device.min_voxels = absl::GetFlag(FLAGS_multi_device_min_voxels);
  const int64_t kept_host_memory = absl::GetFlag(FLAGS_kept_host_memory_bytes);
  if (kept_host_memory < -1) {
    std::fprintf(stderr,
                 "tomod: --kept_host_memory_bytes: %lld is below -1 (-1: an eighth of the "
                 "machine's memory; 0: keep none)\n",
                 static_cast<long long>(kept_host_memory));
    return 2;
  }
  if (kept_host_memory >= 0) {
    tomo::core::HostBlockPool::Get().SetKeptBytesLimit(static_cast<size_t>(kept_host_memory));
  }
  options.drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.metrics_host = absl::GetFlag(FLAGS_metrics_host);
  options.metrics_token_file = absl::GetFlag(FLAGS_metrics_token_file);
  options.crash_on_job_name_for_testing = absl::GetFlag(FLAGS_testing_crash_on_job_name);
  options.min_free_spool_bytes = absl::GetFlag(FLAGS_min_free_spool_bytes);
  options.spool_reserve_bytes = absl::GetFlag(FLAGS_spool_reserve_bytes);
  absl::Status status = tomo::server::RunServer(options);
  if (!status.ok()) {
    std::fprintf(stderr, "tomod: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

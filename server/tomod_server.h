// tomod's server: the gRPC server with the Reconstruction service, the health service and
// reflection, over a JobManager and a Spool; the Prometheus endpoint (metrics_http.h,
// tomod_metrics.h) when metrics_port is set; and RunServer(), the daemon's whole life.
//
// Security (docs/security.md): with tls.cert_file and tls.key_file the server speaks TLS,
// with tls.client_ca_file mutual TLS (ReloadTls reads the files again on SIGHUP, served
// from a copy in <spool>/tls: security/tls_reload.h); plain-text gRPC is served only on loopback addresses
// (127.0.0.0/8, ::1, localhost) and unix sockets unless allow_insecure_remote is set. With
// tokens_file, every RPC but the health service's needs a bearer token (ReloadTokens reads
// the file again; RunServer calls it on SIGHUP); tokens and client certificates name the
// tenant, which owns the jobs it submits (security/authenticator.h). Reflection is served
// only without authentication. The metrics endpoint binds metrics_host (loopback by
// default), plain HTTP, so another host needs allow_insecure_remote too; metrics_token_file
// makes scrapes send a token.
//
// Shutdown (SIGTERM/SIGINT in RunServer, or Shutdown()) drains: health NOT_SERVING at
// once; new Submits refused with UNAVAILABLE naming the reason (uploads in progress may
// still commit); no new job started; up to drain_timeout for the running jobs to end; then
// the runs still going are stopped and their jobs handed back as QUEUED (durably, the run
// not counted as an attempt) to run after the restart; workers joined, watches closed,
// the gRPC server shut down with shutdown_grace. GetJob, WatchJob and FetchResult keep
// working during the drain. RunServer: a second signal cuts the drain short, and should
// the whole stop take longer than drain_timeout + shutdown_grace + kStopMargin (a run
// that ignores cancellation), tomod exits 0 anyway: the job is still RUNNING in the
// database, so the next start queues it again (that run then counts as an attempt).
// Log lines go to stderr.
//
//   ServerOptions options;
//   options.listen = "127.0.0.1:0";
//   options.spool_dir = "/tmp/spool";
//   TOMO_ASSIGN_OR_RETURN(std::unique_ptr<TomodServer> server, TomodServer::Start(options));
//   ... connect to 127.0.0.1:server->port() ...
//   server->Shutdown();
//
// Errors of Start: INVALID_ARGUMENT for a bad --listen or a refused insecure address,
// FAILED_PRECONDITION for a spool in use, UNAVAILABLE when the address cannot be bound.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/server.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/algorithms/reconstruction.h"
#include "core/devices/devices.h"
#include "server/jobs/job_manager.h"
#include "server/security/tls_credentials.h"
#include "server/security/tls_reload.h"
#include "server/security/tokens_file.h"
#include "runner/job_spec.h"
#include "server/telemetry/metrics_http.h"
#include "server/api/reconstruction_service.h"
#include "server/telemetry/tomod_metrics.h"
#include "server/storage/spool.h"
#include "server/storage/spool_reserve.h"

namespace tomo::server {

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";
  // When set, the bound port is written there (atomically) once the server listens.
  std::string port_file;
  std::string spool_dir = "/var/lib/tomoserve/spool";
  // Adds the CPU as one more device when there are GPUs (without GPUs it is always used).
  bool cpu_worker = false;
  bool allow_insecure_remote = false;
  // --tls_cert_file, --tls_key_file, --tls_client_ca_file (tls_credentials.h).
  ServerTlsFiles tls;
  // --tokens_file: bearer tokens -> tenant and role (tokens_file.h); empty: none.
  std::string tokens_file;
  // --tenant_max_unfinished_jobs, --tenant_max_spool_bytes: see JobManagerOptions.
  uint32_t tenant_max_unfinished_jobs = 0;
  uint64_t tenant_max_spool_bytes = 0;
  ServerLimits limits;
  // Ids of the devices to run jobs on ("cuda:0", "cpu"), one worker each; empty: see
  // devices. "cpu:N" (N >= 1) is one more CPU worker, sharing the host's cores with the
  // others ("cpu:0" is "cpu").
  std::vector<std::string> device_ids;
  // Devices to run jobs on when device_ids is empty; empty too: the CUDA devices (plus the
  // CPU per cpu_worker), or the CPU when there is none. Tests set {core::CpuDevice()}.
  std::vector<core::DeviceInfo> devices;
  // --memory_budget_bytes: upper bound on the device memory one job may use (0: the
  // device's free memory); a job's JobSpec.memory_budget_bytes may lower it further.
  uint64_t memory_budget_bytes = 0;
  // --max_attempts, --result_ttl, --max_spool_bytes: see JobManagerOptions.
  uint32_t max_attempts = 3;
  absl::Duration result_ttl = absl::ZeroDuration();
  uint64_t max_spool_bytes = 0;
  // --matrix_cache_bytes: host memory for built ART system matrices kept for later jobs of
  // the same scan (matrix_cache.h); 0 keeps none.
  uint64_t matrix_cache_bytes = 2ull << 30;
  // --prefetch_bytes: see JobManagerOptions::prefetch_bytes (0: no reading ahead).
  uint64_t prefetch_bytes = kDefaultPrefetchBytes;
  // --reconstruct_while_uploading: see JobManagerOptions.
  WhileUploading reconstruct_while_uploading = WhileUploading::kOnDevices;
  // --multi_device_jobs, --multi_device_min_voxels: see JobManagerOptions.
  MultiDevicePolicy multi_device;
  int max_message_bytes = 16 << 20;
  // --metrics_port: Prometheus metrics at http://<metrics_host>:<port>/metrics; 0: off
  // (the flag's default is kDefaultMetricsPort; tests leave it off).
  int metrics_port = 0;
  // --metrics_host: the address the metrics endpoint binds (an IP address or localhost).
  std::string metrics_host = "127.0.0.1";
  // --metrics_token_file: a file holding the token scrapes must send (mode checked as the
  // tokens file's); empty: none.
  std::string metrics_token_file;
  // --drain_timeout: how long a stop waits for running jobs before it requeues them.
  absl::Duration drain_timeout = absl::Seconds(30);
  absl::Duration shutdown_grace = absl::Seconds(5);
  // --min_free_spool_bytes: see JobManagerOptions::min_free_spool_bytes. Below it tomod is
  // degraded: health NOT_SERVING for kAdmissionHealthService, tomod_spool_degraded 1.
  uint64_t min_free_spool_bytes = 64ull << 20;
  // --spool_reserve_bytes: pre-allocated space in <spool>/reserve.runtime (half, given back
  // when a job database write fails for want of space) and <spool>/reserve.startup (half,
  // given back at a start on a full disk), each made again once there is room; 0: none.
  uint64_t spool_reserve_bytes = 32ull << 20;
  // How often the spool's free space is checked (health, metrics, the reserve).
  absl::Duration space_check_interval = absl::Seconds(1);
  // --max_uploads_per_client, --upload_idle_timeout: see JobManagerOptions.
  uint32_t max_uploads_per_client = 16;
  absl::Duration upload_idle_timeout = absl::Minutes(2);
  // --testing_crash_on_job_name: see JobManagerOptions::crash_on_job_name_for_testing.
  std::string crash_on_job_name_for_testing;
};

// tomod's --metrics_port by default: next to the ports of Prometheus' own exporters
// (9100 node, 9400 DCGM GPU), not taken by a common one.
inline constexpr int kDefaultMetricsPort = 9473;


// Beyond drain_timeout + shutdown_grace, how long RunServer waits for runs to notice their
// cancellation before it exits regardless. Runs check it between iterations and chunks of
// views (a CPU back projection every 32 views), well within this. With the defaults a stop
// takes at most 30 + 5 + 5 = 40 s, under the 45 s stop timeout deploy/README.md gives the
// container (docker's own default is 10 s, systemd's 90 s).
inline constexpr absl::Duration kStopMargin = absl::Seconds(5);

// The devices options select (see ServerOptions::device_ids and devices). INVALID_ARGUMENT
// naming the id and the devices present for an id that is not one of them (nor a CPU
// worker "cpu:N"), or is repeated.
absl::StatusOr<std::vector<core::DeviceInfo>> SelectDevices(const ServerOptions& options);

// OK when listen is a loopback address or a unix socket, or tls is set, or
// allow_insecure_remote is; INVALID_ARGUMENT explaining the choice otherwise, or for an
// address that cannot be parsed.
absl::Status CheckListenAddress(const std::string& listen, bool tls, bool allow_insecure_remote);
// Whether host (an address, brackets allowed, or localhost) is a loopback address.
bool IsLoopbackHost(std::string host);

// The gRPC health service name that is NOT_SERVING while the spool's file system has less
// than --min_free_spool_bytes free: Submits are then refused, while the service itself
// (tomoserve.v1.Reconstruction: watches, fetches, deletes) stays SERVING.
inline constexpr char kAdmissionHealthService[] = "tomoserve.v1.Reconstruction.admission";

class TomodServer {
 public:
  // registry: the algorithms jobs may use (AlgorithmRegistry::WithBuiltins() in tomod).
  static absl::StatusOr<std::unique_ptr<TomodServer>> Start(
      const ServerOptions& options, core::AlgorithmRegistry registry);
  static absl::StatusOr<std::unique_ptr<TomodServer>> Start(const ServerOptions& options);
  // Shutdown().
  ~TomodServer();
  TomodServer(const TomodServer&) = delete;
  TomodServer& operator=(const TomodServer&) = delete;

  // The port bound (the one chosen when listen asked for port 0; 0 for unix sockets).
  int port() const { return port_; }
  JobManager& manager() { return *manager_; }
  // The drain sequence described above; reason is what refused Submits are told.
  // Idempotent; blocks until done.
  void Shutdown(absl::string_view reason = "tomod is shutting down");
  // Ends a Shutdown's wait for running jobs now (they are requeued). Thread-safe.
  void CutDrainShort();
  // Reads --tokens_file again (TokensFile::Reload: a bad file keeps the table in force,
  // logged); OK without a tokens file. Thread-safe.
  absl::Status ReloadTokens();
  // Reads the TLS files again (ReloadableTls::Reload: files that do not pass keep the
  // certificates in force, logged); OK without TLS. Thread-safe.
  absl::Status ReloadTls();
  // The metrics port bound (0: metrics off).
  int metrics_port() const { return metrics_http_ ? metrics_http_->port() : 0; }
  TomodMetrics& metrics() { return *metrics_; }
  // Whether the spool's free space was below --min_free_spool_bytes at the last check.
  bool degraded() const {
    absl::MutexLock lock(&space_mu_);
    return degraded_;
  }

 private:
  TomodServer() = default;
  // Free space -> health, metrics, reserve file; logs a change of the degraded state.
  void CheckSpace();
  void SpaceMonitorLoop();

  ServerOptions options_;
  core::AlgorithmRegistry registry_;
  std::unique_ptr<TomodMetrics> metrics_ = std::make_unique<TomodMetrics>();
  std::unique_ptr<TokensFile> tokens_;  // null without --tokens_file
  std::unique_ptr<ReloadableTls> tls_;   // null without TLS; outlives server_
  std::unique_ptr<Spool> spool_;
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<ReconstructionService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;
  int port_ = 0;
  bool shut_down_ = false;
  std::unique_ptr<SpoolReserve> runtime_reserve_;
  std::unique_ptr<SpoolReserve> startup_reserve_;
  std::thread space_monitor_;
  mutable absl::Mutex space_mu_;
  bool degraded_ ABSL_GUARDED_BY(space_mu_) = false;
  bool space_known_ ABSL_GUARDED_BY(space_mu_) = false;
  bool stop_space_monitor_ ABSL_GUARDED_BY(space_mu_) = false;
};

// tomod's life: allocator settings, signals blocked (SIGTERM, SIGINT and SIGHUP are taken
// by sigwait on a dedicated thread), TomodServer::Start, wait for a signal (SIGHUP reloads
// the tokens file and goes on), Shutdown. Returns
// OK after a clean shutdown, or the start-up error.
absl::Status RunServer(const ServerOptions& options);

}  // namespace tomo::server

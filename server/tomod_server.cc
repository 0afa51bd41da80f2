#include "server/tomod_server.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "core/algorithms/stored_matrix_art.h"
#include "core/base/build_info.h"
#include "core/base/status_macros.h"
#include "core/data/host_block_pool.h"
#include "google/protobuf/stubs/logging.h"
#include "transfer/allocator_tuning.h"
#include "server/jobs/crash_log.h"
#include "runner/disk_space.h"
#include "server/telemetry/gpu_utilization.h"
#include "server/security/secret_file.h"
#include "server/security/token_table.h"
#include "server/telemetry/log.h"
#include "server/jobs/matrix_cache.h"

namespace tomo::server {
namespace {

// The reflection library registers its plugin with every ServerBuilder as soon as it is
// loaded, so leaving out InitProtoReflectionServerBuilderPlugin() does not turn it off: this
// option takes the plugin out of the builder again (for tomod with authentication).
class WithoutReflection : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*arguments*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
                                    return absl::StrContains(plugin->name(), "reflection");
                                  }),
                   plugins->end());
  }
};

bool IsUnixAddress(absl::string_view listen) {
  return absl::StartsWith(listen, "unix:") || absl::StartsWith(listen, "unix-abstract:");
}

}  // namespace

bool IsLoopbackHost(std::string host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) return v6.s6_addr[12] == 127;
  }
  return false;
}

namespace {

// The token of --metrics_token_file: the file's text without surrounding white space, read
// as a secret (secret_file.h), kMinTokenBytes or more printable characters.
absl::StatusOr<std::string> ReadMetricsToken(const std::string& path) {
  TOMO_ASSIGN_OR_RETURN(std::string text, ReadSecretFile("--metrics_token_file", path));
  const std::string token(absl::StripAsciiWhitespace(text));
  if (token.size() < kMinTokenBytes || token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_token_file=", path, ": the token's length ", token.size(),
        " is out of range [", kMinTokenBytes, ", ", kMaxTokenBytes, "]"));
  }
  for (char c : token) {
    if (c < '!' || c > '~') {
      return absl::InvalidArgumentError(absl::StrCat(
          "--metrics_token_file=", path,
          ": the token has a character that is not printable ASCII (or a space)"));
    }
  }
  return token;
}

absl::Status CheckLimits(const ServerLimits& limits) {
  if (limits.max_upload_bytes < 1) {
    return absl::InvalidArgumentError("--max_upload_bytes: 0 is out of range [1, 2^64)");
  }
  if (limits.max_voxels < 1) {
    return absl::InvalidArgumentError("--max_voxels: 0 is out of range [1, 2^64)");
  }
  if (limits.max_views < 1) {
    return absl::InvalidArgumentError("--max_views: 0 is out of range [1, 2^32)");
  }
  if (limits.max_queue_length < 1) {
    return absl::InvalidArgumentError("--max_queue_length: 0 is out of range [1, 2^32)");
  }
  if (limits.max_iterations < 1) {
    return absl::InvalidArgumentError("--max_iterations: 0 is out of range [1, 2^32)");
  }
  return absl::OkStatus();
}

// The gauges read at scrape time, from the manager, the device list and NVML (gpus may be
// null: no utilisation then).
void AddScrapeCollector(TomodMetrics& metrics, const JobManager& manager,
                        std::shared_ptr<const GpuUtilization> gpus) {
  metrics.registry().AddCollector([&metrics, &manager, gpus] {
    metrics.queue_depth().Set({}, static_cast<double>(manager.queue_length()));
    metrics.watchers().Set({}, static_cast<double>(manager.watcher_count()));
    metrics.devices_busy().Set({}, static_cast<double>(manager.busy_devices()));
    metrics.spool_used_bytes().Set({}, static_cast<double>(manager.spool_used_bytes()));
    const std::map<tomoserve::v1::JobState, size_t> counts = manager.JobCountsByState();
    for (int state = tomoserve::v1::JOB_STATE_UPLOADING;
         state <= tomoserve::v1::JOB_STATE_CANCELLED; ++state) {
      auto it = counts.find(static_cast<tomoserve::v1::JobState>(state));
      metrics.jobs().Set({JobStateLabel(static_cast<tomoserve::v1::JobState>(state))},
                         it == counts.end() ? 0.0 : static_cast<double>(it->second));
    }
    const std::vector<core::DeviceInfo> now = core::ListDevices();
    for (const core::DeviceInfo& device : manager.devices()) {
      const core::DeviceInfo* current = &device;
      for (const core::DeviceInfo& d : now) {
        if (d.id == device.id) current = &d;
      }
      metrics.device_memory_free_bytes().Set({device.id},
                                             static_cast<double>(current->memory_free_bytes));
      metrics.device_memory_total_bytes().Set({device.id},
                                              static_cast<double>(current->memory_total_bytes));
      if (gpus != nullptr) {
        if (std::optional<double> busy = gpus->Utilization(current->pci_bus_id)) {
          metrics.device_utilization_ratio().Set({device.id}, *busy);
        }
      }
    }
  });
}

}  // namespace

absl::StatusOr<std::vector<core::DeviceInfo>> SelectDevices(const ServerOptions& options) {
  if (!options.device_ids.empty()) {
    const std::vector<core::DeviceInfo> present = core::ListDevices();
    std::vector<core::DeviceInfo> selected;
    for (const std::string& given : options.device_ids) {
      // "cpu:N": one more CPU worker (several stand in for GPUs in tests of the scheduler,
      // or run small jobs side by side on a large host); "cpu:0" is the CPU itself.
      std::string id = given;
      std::optional<core::DeviceInfo> extra_cpu;
      uint32_t cpu_number = 0;
      if (absl::StartsWith(given, "cpu:") && absl::SimpleAtoi(given.substr(4), &cpu_number)) {
        extra_cpu = core::CpuDevice();
        if (cpu_number > 0) extra_cpu->id = absl::StrCat("cpu:", cpu_number);
        id = extra_cpu->id;
      }
      auto found = std::find_if(present.begin(), present.end(),
                                [&](const core::DeviceInfo& d) { return d.id == id; });
      if (!extra_cpu.has_value() && found == present.end()) {
        std::vector<std::string> ids;
        for (const core::DeviceInfo& d : present) ids.push_back(d.id);
        return absl::InvalidArgumentError(absl::StrCat("--devices: ", id,
                                                       " is not a device here; present: ",
                                                       absl::StrJoin(ids, ", ")));
      }
      if (std::any_of(selected.begin(), selected.end(),
                      [&](const core::DeviceInfo& d) { return d.id == id; })) {
        return absl::InvalidArgumentError(
            absl::StrCat("--devices: ", id, " is listed twice; each device gets one worker"));
      }
      selected.push_back(extra_cpu.has_value() ? *extra_cpu : *found);
    }
    return selected;
  }
  if (!options.devices.empty()) return options.devices;
  std::vector<core::DeviceInfo> devices = core::ListCudaDevices();
  if (devices.empty() || options.cpu_worker) devices.push_back(core::CpuDevice());
  return devices;
}

absl::Status CheckListenAddress(const std::string& listen, bool tls, bool allow_insecure_remote) {
  if (listen.empty()) return absl::InvalidArgumentError("--listen: must not be empty");
  if (IsUnixAddress(listen)) return absl::OkStatus();
  const size_t colon = listen.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen=", listen, ": expected host:port (port 0 picks a free one) or unix:path"));
  }
  const std::string host = listen.substr(0, colon);
  if (tls || IsLoopbackHost(host) || allow_insecure_remote) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--listen=", listen, ": ", host.empty() ? "all interfaces" : host,
      " is not a loopback address, and tomod serves plain-text gRPC only on loopback "
      "(127.0.0.0/8, ::1, localhost) or unix sockets; pass --tls_cert_file and "
      "--tls_key_file to serve TLS (docs/security.md), or --allow_insecure_remote to serve "
      "without encryption on this address anyway"));
}

absl::StatusOr<std::unique_ptr<TomodServer>> TomodServer::Start(const ServerOptions& options) {
  core::AlgorithmRegistry registry = core::AlgorithmRegistry::WithBuiltins();
  // ART's matrices kept between jobs of the same scan.
  auto cache = std::make_shared<MatrixCache>(options.matrix_cache_bytes);
  registry.Register("art", core::MakeStoredMatrixArtAlgorithm(cache));
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<TomodServer> server, Start(options, std::move(registry)));
  TomodMetrics* metrics = &server->metrics();
  metrics->registry().AddCollector([metrics, cache] {
    metrics->matrix_cache_bytes().Set({}, static_cast<double>(cache->kept_bytes()));
    metrics->matrix_cache_reused().Set({}, static_cast<double>(cache->hits()));
    metrics->matrix_cache_built().Set({}, static_cast<double>(cache->misses()));
    metrics->kept_host_bytes().Set(
        {}, static_cast<double>(core::HostBlockPool::Get().kept_bytes()));
  });
  return server;
}

absl::StatusOr<std::unique_ptr<TomodServer>> TomodServer::Start(
    const ServerOptions& options, core::AlgorithmRegistry registry) {
  TOMO_RETURN_IF_ERROR(
      CheckListenAddress(options.listen, options.tls.tls(), options.allow_insecure_remote));
  // Checked here, before anything starts; served from the spool's copy (tls_reload.h).
  const bool tls = options.tls.tls() || options.tls.mutual();
  if (tls) TOMO_RETURN_IF_ERROR(ReadServerTls(options.tls).status());
  if (options.metrics_port != 0 && !IsLoopbackHost(options.metrics_host) &&
      !options.allow_insecure_remote) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_host=", options.metrics_host,
        " is not a loopback address, and the metrics are served over plain HTTP; pass "
        "--allow_insecure_remote to serve them there anyway (with --metrics_token_file, "
        "scrapes must send a token), or keep the default 127.0.0.1"));
  }
  std::string metrics_token;
  if (!options.metrics_token_file.empty()) {
    TOMO_ASSIGN_OR_RETURN(metrics_token, ReadMetricsToken(options.metrics_token_file));
  }
  std::unique_ptr<TokensFile> tokens;
  if (!options.tokens_file.empty()) {
    TOMO_ASSIGN_OR_RETURN(tokens, TokensFile::Open(options.tokens_file));
  }
  TOMO_RETURN_IF_ERROR(CheckLimits(options.limits));
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError("--max_attempts: 0 is out of range [1, 2^32)");
  }
  if (options.result_ttl < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--result_ttl: ", absl::FormatDuration(options.result_ttl),
                     " is negative; it must be >= 0 (0 keeps finished jobs until deleted)"));
  }
  if (options.upload_idle_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--upload_idle_timeout: ", absl::FormatDuration(options.upload_idle_timeout),
                     " is negative; 0 means never"));
  }
  if (options.drain_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--drain_timeout: ", absl::FormatDuration(options.drain_timeout),
                     " is negative; it must be >= 0 (0 requeues running jobs at once)"));
  }
  TOMO_ASSIGN_OR_RETURN(std::vector<core::DeviceInfo> devices, SelectDevices(options));
  std::unique_ptr<TomodServer> server(new TomodServer);
  server->options_ = options;
  server->registry_ = std::move(registry);
  server->tokens_ = std::move(tokens);
  TOMO_ASSIGN_OR_RETURN(server->spool_, Spool::Open(options.spool_dir));
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (tls) {
    // In the spool, which this tomod holds (Spool::Open locked it).
    TOMO_ASSIGN_OR_RETURN(server->tls_,
                          ReloadableTls::Create(options.tls, server->spool_->root() + "/tls"));
    credentials = server->tls_->credentials();
  }
  // Two halves of --spool_reserve_bytes: one given back when a job database write fails
  // for want of space while tomod runs, the other only at a start on a full disk, so that
  // the database still opens and recovers after the first half was used up.
  const std::filesystem::path spool_root(server->spool_->root());
  server->runtime_reserve_ = std::make_unique<SpoolReserve>(
      (spool_root / "reserve.runtime").string(), options.spool_reserve_bytes / 2);
  server->startup_reserve_ = std::make_unique<SpoolReserve>(
      (spool_root / "reserve.startup").string(),
      options.spool_reserve_bytes - options.spool_reserve_bytes / 2);
  if (absl::StatusOr<uint64_t> free_bytes = FileSystemFreeBytes(server->spool_->root());
      free_bytes.ok() && *free_bytes < options.min_free_spool_bytes) {
    const bool startup = server->startup_reserve_->Release();
    const bool runtime = server->runtime_reserve_->Release();
    if (startup || runtime) {
      Log(absl::StrCat("spool ", server->spool_->root(), " has ", *free_bytes,
                       " bytes free, below --min_free_spool_bytes ",
                       options.min_free_spool_bytes, ": its reserve is given back"));
    }
  }

  JobManagerOptions manager_options;
  manager_options.limits = options.limits;
  manager_options.memory_budget_bytes = options.memory_budget_bytes;
  manager_options.max_attempts = options.max_attempts;
  manager_options.result_ttl = options.result_ttl;
  manager_options.max_spool_bytes = options.max_spool_bytes;
  manager_options.tenant_max_unfinished_jobs = options.tenant_max_unfinished_jobs;
  manager_options.tenant_max_spool_bytes = options.tenant_max_spool_bytes;
  manager_options.prefetch_bytes = options.prefetch_bytes;
  manager_options.reconstruct_while_uploading = options.reconstruct_while_uploading;
  manager_options.devices = std::move(devices);
  manager_options.multi_device = options.multi_device;
  manager_options.metrics = server->metrics_.get();
  manager_options.crash_log_path =
      (std::filesystem::path(server->spool_->root()) / kCrashLogName).string();
  manager_options.crash_on_job_name_for_testing = options.crash_on_job_name_for_testing;
  manager_options.min_free_spool_bytes = options.min_free_spool_bytes;
  manager_options.upload_idle_timeout = options.upload_idle_timeout;
  manager_options.max_uploads_per_client = options.max_uploads_per_client;
  manager_options.free_emergency_space = [reserve = server->runtime_reserve_.get()] {
    return reserve->Release();
  };
  server->manager_ =
      std::make_unique<JobManager>(manager_options, *server->spool_, server->registry_);
  TOMO_RETURN_IF_ERROR(server->manager_->Start());
  const Authenticator authenticator(server->tokens_.get(), options.tls.mutual(),
                                    server->metrics_.get());
  server->service_ = std::make_unique<ReconstructionService>(
      *server->manager_, server->registry_, server->metrics_.get(), authenticator);
  AddScrapeCollector(*server->metrics_, *server->manager_,
                     std::shared_ptr<const GpuUtilization>(GpuUtilization::Open()));
  if (options.metrics_port != 0) {
    MetricsHttpOptions metrics_options;
    metrics_options.host = options.metrics_host;
    metrics_options.port = options.metrics_port;
    metrics_options.bearer_token = metrics_token;
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http =
        MetricsHttpServer::Start(metrics_options, server->metrics_->registry());
    if (!http.ok()) {
      server->Shutdown();
      return http.status();
    }
    server->metrics_http_ = std::move(*http);
  }

  grpc::EnableDefaultHealthCheckService(true);
  // Reflection cannot ask for a token: it is served only where every caller may call.
  grpc::ServerBuilder builder;
  if (!authenticator.enabled()) {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  } else {
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
  int selected_port = 0;
  builder.AddListeningPort(options.listen, credentials, &selected_port);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // A second daemon on the same port must fail, not share it (gRPC sets SO_REUSEPORT).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || selected_port == 0) {
    server->Shutdown();
    return absl::UnavailableError(
        absl::StrCat("--listen=", options.listen,
                     ": cannot listen there (address in use, or not an address of this host)"));
  }
  server->port_ = IsUnixAddress(options.listen) ? 0 : selected_port;
  grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus(true);
    health->SetServingStatus(tomoserve::v1::Reconstruction::service_full_name(), true);
  }
  server->CheckSpace();
  server->space_monitor_ = std::thread([s = server.get()] { s->SpaceMonitorLoop(); });
  if (!options.port_file.empty()) {
    absl::Status written =
        WriteFileAtomically(options.port_file, absl::StrCat(server->port_, "\n"));
    if (!written.ok()) {
      server->Shutdown();
      return absl::Status(written.code(),
                          absl::StrCat("--port_file: ", written.message()));
    }
  }
  Log(absl::StrCat("listening on ", options.listen,
                   server->port_ != 0 ? absl::StrCat(" (port ", server->port_, ")") : "",
                   options.tls.mutual() ? ", mutual TLS"
                                        : (options.tls.tls() ? ", TLS" : ", plain text"),
                   server->tokens_ ? absl::StrCat(", ", server->tokens_->size(), " tokens")
                                   : (options.tls.mutual() ? ", tenants from client certificates"
                                                           : ", no authentication"),
                   server->metrics_http_
                       ? absl::StrCat(", metrics on http://",
                                      absl::StrContains(options.metrics_host, ':') &&
                                              options.metrics_host.front() != '['
                                          ? absl::StrCat("[", options.metrics_host, "]")
                                          : options.metrics_host,
                                      ":", server->metrics_http_->port(), "/metrics",
                                      metrics_token.empty() ? "" : " (token needed)")
                       : ", metrics off",
                   ", spool ", server->spool_->root(), ", version ", core::TomoVersion()));
  return server;
}

TomodServer::~TomodServer() { Shutdown(); }

void TomodServer::CheckSpace() {
  absl::StatusOr<uint64_t> free_bytes = FileSystemFreeBytes(spool_->root());
  if (!free_bytes.ok()) return;
  const bool degraded = *free_bytes < options_.min_free_spool_bytes;
  metrics_->spool_free_bytes().Set({}, static_cast<double>(*free_bytes));
  metrics_->spool_degraded().Set({}, degraded ? 1 : 0);
  bool changed = false;
  {
    absl::MutexLock lock(&space_mu_);
    changed = !space_known_ || degraded != degraded_;
    degraded_ = degraded;
    space_known_ = true;
  }
  if (changed) {
    grpc::HealthCheckServiceInterface* health =
        server_ ? server_->GetHealthCheckService() : nullptr;
    if (health != nullptr) health->SetServingStatus(kAdmissionHealthService, !degraded);
    if (degraded) {
      Log(absl::StrCat("spool degraded: ", *free_bytes, " bytes free on ", spool_->root(),
                       ", below --min_free_spool_bytes ", options_.min_free_spool_bytes,
                       "; new jobs are refused, results are served and jobs can be deleted (",
                       kAdmissionHealthService, " NOT_SERVING)"));
    } else {
      Log(absl::StrCat("spool has room again: ", *free_bytes, " bytes free on ",
                       spool_->root(), " (", kAdmissionHealthService, " SERVING)"));
    }
  }
  // The reserve is made again only when it leaves the margin intact.
  for (SpoolReserve* reserve : {startup_reserve_.get(), runtime_reserve_.get()}) {
    if (!degraded && !reserve->present() &&
        *free_bytes >= options_.min_free_spool_bytes + reserve->bytes()) {
      if (reserve->Restore().ok()) *free_bytes -= std::min(*free_bytes, reserve->bytes());
    }
  }
}

void TomodServer::SpaceMonitorLoop() {
  absl::MutexLock lock(&space_mu_);
  while (!stop_space_monitor_) {
    space_mu_.AwaitWithTimeout(absl::Condition(&stop_space_monitor_),
                               options_.space_check_interval);
    if (stop_space_monitor_) break;
    space_mu_.Unlock();
    CheckSpace();
    space_mu_.Lock();
  }
}

void TomodServer::Shutdown(absl::string_view reason) {
  if (shut_down_) return;
  shut_down_ = true;
  if (space_monitor_.joinable()) {
    {
      absl::MutexLock lock(&space_mu_);
      stop_space_monitor_ = true;
    }
    space_monitor_.join();
  }
  if (server_) {
    grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
    if (health != nullptr) health->SetServingStatus(false);
    Log(absl::StrCat("health NOT_SERVING (", reason, ")"));
  }
  if (manager_) {
    manager_->Drain(options_.drain_timeout, reason);
    manager_->Shutdown();
  }
  if (server_) {
    Log(absl::StrCat("workers stopped; closing open calls (grace ",
                     absl::FormatDuration(options_.shutdown_grace), ")"));
    const auto deadline =
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.shutdown_grace));
    server_->Shutdown(deadline);
    server_->Wait();
    Log("gRPC server stopped");
  }
  metrics_http_.reset();  // last: a drain can be watched on the metrics to the end
}

void TomodServer::CutDrainShort() {
  if (manager_) manager_->CutDrainShort();
}

absl::Status TomodServer::ReloadTokens() {
  if (tokens_ == nullptr) {
    Log("SIGHUP: no --tokens_file to reload");
    return absl::OkStatus();
  }
  return tokens_->Reload();
}

absl::Status TomodServer::ReloadTls() {
  if (tls_ == nullptr) return absl::OkStatus();
  return tls_->Reload();
}

namespace {

// protobuf's own messages (e.g. a request string that is not UTF-8, which any client can
// send) into tomod's log, so that it stays one JSON object a line.
void ProtobufLogToJson(google::protobuf::LogLevel level, const char* filename, int line,
                       const std::string& message) {
  LogEvent(level >= google::protobuf::LOGLEVEL_ERROR ? LogLevel::kWarning : LogLevel::kInfo,
           "protobuf", "", {{"message", message}, {"source", absl::StrCat(filename, ":", line)}});
}

}  // namespace

absl::Status RunServer(const ServerOptions& options) {
  transfer::KeepTransferBuffersInTheHeap();
  google::protobuf::SetLogHandler(&ProtobufLogToJson);
  // Blocked here, before any other thread exists, so that every thread inherits the mask
  // and only sigwait below sees the signals.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<TomodServer> server, TomodServer::Start(options));

  // The first signal starts the drain, a second one cuts it short; the thread ends when
  // it is sent one more signal after the stop.
  absl::Notification stop;
  std::atomic<bool> stopped{false};
  std::atomic<int> received{0};
  std::thread waiter([&] {
    for (int count = 0;;) {
      int signal_number = 0;
      if (sigwait(&signals, &signal_number) != 0 || stopped.load()) return;
      if (signal_number == SIGHUP) {
        server->ReloadTokens().IgnoreError();  // logged; the table in force stays
        server->ReloadTls().IgnoreError();     // logged; the certificates in force stay
        continue;
      }
      if (count++ == 0) {
        received = signal_number;
        stop.Notify();
      } else {
        Log("second signal: cutting the drain short");
        server->CutDrainShort();
      }
    }
  });
  stop.WaitForNotification();
  const char* name = received.load() == SIGINT ? "SIGINT" : "SIGTERM";
  Log(absl::StrCat("received ", name, "; draining"));

  absl::Notification done;
  const absl::Duration limit = options.drain_timeout + options.shutdown_grace + kStopMargin;
  std::thread watchdog([&] {
    if (done.WaitForNotificationWithTimeout(limit)) return;
    Log(absl::StrCat("the stop took longer than ", absl::FormatDuration(limit),
                     " (a run ignores cancellation); exiting now: the jobs still RUNNING are "
                     "queued again at the next start"),
        LogLevel::kError);
    std::_Exit(0);
  });
  server->Shutdown(absl::StrCat("tomod is draining (", name, ")"));
  done.Notify();
  watchdog.join();
  stopped = true;
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  Log("stopped");
  return absl::OkStatus();
}

}  // namespace tomo::server

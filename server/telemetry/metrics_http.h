// MetricsHttpServer: tomod's Prometheus endpoint. Serves a MetricRegistry's exposition at
// GET /metrics (HEAD too) over plain HTTP with civetweb (Debian's libcivetweb-dev), on its
// own small thread pool, so a scrape never waits for gRPC's threads or the job manager's
// lock longer than rendering takes. Anything else is 404; methods other than GET and HEAD
// are 405.
//
// The address follows tomod's --listen host: loopback unless remote serving was asked for
// (the metrics name no job data, but the rule for plain text is the same).
//
//   TOMO_ASSIGN_OR_RETURN(std::unique_ptr<MetricsHttpServer> http,
//                         MetricsHttpServer::Start("127.0.0.1", 9464, registry));
//   ... curl http://127.0.0.1:9464/metrics ...
//
// Start errors: INVALID_ARGUMENT for a port outside [0, 65535], UNAVAILABLE naming
// --metrics_port and civetweb's reason when the address cannot be bound. The registry must
// outlive the server; destruction stops it (waiting for scrapes in progress).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/telemetry/metrics.h"

struct mg_context;
struct mg_connection;

namespace tomo::server {

class MetricsHttpServer {
 public:
  // host: an IPv4 address, or an IPv6 one in brackets ("[::1]"); port 0 picks a free one.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& host, int port,
                                                                  const MetricRegistry& registry);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The port bound.
  int port() const { return port_; }

 private:
  explicit MetricsHttpServer(const MetricRegistry& registry) : registry_(registry) {}
  static int HandleMetrics(::mg_connection* connection, void* self);

  const MetricRegistry& registry_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace tomo::server

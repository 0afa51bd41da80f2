// MetricsHttpServer: tomod's Prometheus endpoint. Serves a MetricRegistry's exposition at
// GET /metrics (HEAD too) over plain HTTP with libmicrohttpd (Debian's libmicrohttpd-dev):
// one event-driven thread (epoll) serves every connection, so idle or slow connections
// hold no thread and cannot keep a scrape waiting; at most max_connections are open at
// once (more are refused at accept), and a connection idle for idle_timeout is closed.
// Rendering runs on that thread and never waits for gRPC's threads or the job manager's
// lock longer than the collectors take. Anything but /metrics is 404; methods other than
// GET and HEAD are 405.
//
// Bearer token: with MetricsHttpOptions::bearer_token set, a scrape must send
// `Authorization: Bearer <token>` (Prometheus: authorization.credentials_file), else 401.
// The token is kept as its SHA-256 digest and compared in constant time; it is never
// logged or echoed.
//
// The address: tomod's --metrics_host (loopback by default, independent of --listen).
//
//   MetricsHttpOptions options;
//   options.host = "127.0.0.1";   // or "::1", "[::1]"
//   options.port = 9473;          // 0 picks a free one
//   TOMO_ASSIGN_OR_RETURN(std::unique_ptr<MetricsHttpServer> http,
//                         MetricsHttpServer::Start(options, registry));
//   ... curl http://127.0.0.1:9473/metrics ...
//
// Start errors: INVALID_ARGUMENT for a port outside [0, 65535] or a host that is not an IP
// address (or localhost), UNAVAILABLE naming --metrics_port and the reason when the address
// cannot be bound. The registry must outlive the server; destruction stops it (waiting for
// a scrape in progress).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/telemetry/metrics.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace tomo::server {

struct MetricsHttpOptions {
  // An IPv4 or IPv6 address (brackets optional) or localhost (127.0.0.1).
  std::string host = "127.0.0.1";
  int port = 0;
  // Empty: scrapes need no token.
  std::string bearer_token;
  unsigned max_connections = 64;
  absl::Duration idle_timeout = absl::Seconds(5);
};

class MetricsHttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const MetricsHttpOptions& options, const MetricRegistry& registry);
  // Start with options {host, port} and the other fields' defaults.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& host, int port,
                                                                  const MetricRegistry& registry);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The port bound.
  int port() const { return port_; }

  // For libmicrohttpd's access handler only: queues the answer to one request (MHD_YES or
  // MHD_NO, as MHD_queue_response returns).
  int Answer(MHD_Connection* connection, const char* url, const char* method) const;

 private:
  explicit MetricsHttpServer(const MetricRegistry& registry) : registry_(registry) {}
  bool Authorized(MHD_Connection* connection) const;

  const MetricRegistry& registry_;
  std::string token_digest_;  // SHA-256 of the bearer token; empty: none needed
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

}  // namespace tomo::server

#include "server/telemetry/metrics_http.h"

#include <civetweb.h>

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace tomo::server {
namespace {

void InitCivetwebOnce() {
  static std::once_flag once;
  std::call_once(once, [] { mg_init_library(0); });
}

// civetweb's own error log goes to the connection's log callback; tomod logs what matters
// (a failed start) itself, so the library's lines are dropped.
int IgnoreLog(const ::mg_connection*, const char*) { return 1; }

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, const MetricRegistry& registry) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_port: ", port, " is out of range [0, 65535] (0: off)"));
  }
  InitCivetwebOnce();
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer(registry));
  const std::string ports = absl::StrCat(host, ":", port);
  // Two threads: scrapes are rare and short; a third client waits in the queue.
  const char* options[] = {"listening_ports",    ports.c_str(), "num_threads", "2",
                           "request_timeout_ms", "10000",       nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.log_message = IgnoreLog;
  mg_init_data init;
  std::memset(&init, 0, sizeof(init));
  init.callbacks = &callbacks;
  init.user_data = server.get();
  init.configuration_options = options;
  unsigned code = 0;
  char text[256] = {0};
  mg_error_data error;
  error.code = &code;
  error.text = text;
  error.text_buffer_size = sizeof(text);
  server->context_ = mg_start2(&init, &error);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("--metrics_port: cannot serve metrics on ", ports,
                                               ": ", text[0] ? text : "civetweb did not start"));
  }
  mg_server_port bound[4];
  const int count = mg_get_server_ports(server->context_, 4, bound);
  server->port_ = count > 0 ? bound[0].port : port;
  mg_set_request_handler(server->context_, "/metrics$", &MetricsHttpServer::HandleMetrics,
                         server.get());
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (context_ != nullptr) mg_stop(context_);
}

int MetricsHttpServer::HandleMetrics(::mg_connection* connection, void* self) {
  const mg_request_info* request = mg_get_request_info(connection);
  const bool head = std::strcmp(request->request_method, "HEAD") == 0;
  if (!head && std::strcmp(request->request_method, "GET") != 0) {
    mg_printf(connection,
              "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\nContent-Length: 0\r\n"
              "Connection: close\r\n\r\n");
    return 405;
  }
  const std::string body = static_cast<MetricsHttpServer*>(self)->registry_.Render();
  const std::string header = absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: ", kMetricsContentType,
                                          "\r\nContent-Length: ", body.size(),
                                          "\r\nCache-Control: no-cache\r\n"
                                          "Connection: close\r\n\r\n");
  mg_write(connection, header.data(), header.size());
  if (!head) mg_write(connection, body.data(), body.size());
  return 200;
}

}  // namespace tomo::server

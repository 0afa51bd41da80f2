#include "server/telemetry/metrics_http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tomo::server {
namespace {

std::string Sha256(absl::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

// Queues a response with body and content_type (may be empty) and the given extra header.
int Respond(MHD_Connection* connection, unsigned status, const std::string& body,
            const char* content_type, const char* header = nullptr,
            const char* header_value = nullptr) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  if (content_type != nullptr) MHD_add_response_header(response, "Content-Type", content_type);
  MHD_add_response_header(response, "Cache-Control", "no-cache");
  if (header != nullptr) MHD_add_response_header(response, header, header_value);
  const int queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued;
}

// libmicrohttpd's access handler: the answer at the first call (no method here takes a
// body; one sent is dropped as it arrives).
MHD_Result HandleRequest(void* server, MHD_Connection* connection, const char* url,
                         const char* method, const char* /*version*/,
                         const char* /*upload_data*/, size_t* upload_data_size,
                         void** /*request_state*/) {
  *upload_data_size = 0;
  return static_cast<MHD_Result>(
      static_cast<const MetricsHttpServer*>(server)->Answer(connection, url, method));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, const MetricRegistry& registry) {
  MetricsHttpOptions options;
  options.host = host;
  options.port = port;
  return Start(options, registry);
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const MetricsHttpOptions& options, const MetricRegistry& registry) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_port: ", options.port, " is out of range [0, 65535] (0: off)"));
  }
  std::string host = options.host;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (absl::AsciiStrToLower(host) == "localhost") host = "127.0.0.1";
  sockaddr_in v4;
  sockaddr_in6 v6;
  std::memset(&v4, 0, sizeof(v4));
  std::memset(&v6, 0, sizeof(v6));
  const sockaddr* address = nullptr;
  unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD;
  if (inet_pton(AF_INET, host.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<uint16_t>(options.port));
    address = reinterpret_cast<const sockaddr*>(&v4);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<uint16_t>(options.port));
    address = reinterpret_cast<const sockaddr*>(&v6);
    flags |= MHD_USE_IPv6;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_host=", options.host, ": not an IPv4 or IPv6 address (or localhost)"));
  }
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer(registry));
  if (!options.bearer_token.empty()) server->token_digest_ = Sha256(options.bearer_token);
  const unsigned timeout_seconds = static_cast<unsigned>(
      std::max<int64_t>(1, absl::ToInt64Seconds(options.idle_timeout)));
  errno = 0;
  server->daemon_ = MHD_start_daemon(
      flags, static_cast<uint16_t>(options.port), nullptr, nullptr,
      &HandleRequest, server.get(),
      MHD_OPTION_SOCK_ADDR, address, MHD_OPTION_CONNECTION_LIMIT,
      static_cast<unsigned>(std::max(1u, options.max_connections)),
      MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds, MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    const int error = errno;
    return absl::UnavailableError(absl::StrCat(
        "--metrics_port: cannot serve metrics on ", options.host, ":", options.port, ": ",
        error != 0 ? std::strerror(error) : "libmicrohttpd did not start"));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = info != nullptr && info->port != 0 ? info->port : options.port;
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

bool MetricsHttpServer::Authorized(MHD_Connection* connection) const {
  if (token_digest_.empty()) return true;
  const char* value = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Authorization");
  if (value == nullptr) return false;
  absl::string_view text(value);
  if (!absl::StartsWithIgnoreCase(text, "Bearer ")) return false;
  text.remove_prefix(7);
  const std::string digest = Sha256(absl::StripAsciiWhitespace(text));
  return digest.size() == token_digest_.size() &&
         CRYPTO_memcmp(digest.data(), token_digest_.data(), digest.size()) == 0;
}

int MetricsHttpServer::Answer(MHD_Connection* connection, const char* url,
                              const char* method) const {
  if (std::strcmp(url, "/metrics") != 0) {
    return Respond(connection, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n",
                   "text/plain; charset=utf-8");
  }
  const bool head = std::strcmp(method, "HEAD") == 0;
  if (!head && std::strcmp(method, "GET") != 0) {
    return Respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "", nullptr, "Allow", "GET, HEAD");
  }
  if (!Authorized(connection)) {
    return Respond(connection, MHD_HTTP_UNAUTHORIZED,
                   "the metrics need an Authorization: Bearer token (tomod's "
                   "--metrics_token_file)\n",
                   "text/plain; charset=utf-8", "WWW-Authenticate", "Bearer realm=\"tomod\"");
  }
  return Respond(connection, MHD_HTTP_OK, registry_.Render(),
                 std::string(kMetricsContentType).c_str());
}

}  // namespace tomo::server

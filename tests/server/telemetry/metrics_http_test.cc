#include "server/telemetry/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/http_get.h"

namespace tomo::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using tomo::testing::HttpGet;

TEST(MetricsHttpServerTest, ServesTheRegistryAtMetricsOnly) {
  MetricRegistry registry;
  Counter& scrapes = registry.AddCounter("scrapes_total", "Scrapes.");
  registry.AddCollector([&] { scrapes.Add({}); });
  auto server = MetricsHttpServer::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);

  auto response = HttpGet("127.0.0.1", port, "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->headers["content-type"], std::string(kMetricsContentType));
  EXPECT_EQ(response->body,
            "# HELP scrapes_total Scrapes.\n# TYPE scrapes_total counter\n"
            "scrapes_total 1\n");
  EXPECT_EQ(response->headers["content-length"], std::to_string(response->body.size()));

  auto head = HttpGet("127.0.0.1", port, "/metrics", "HEAD");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  auto other = HttpGet("127.0.0.1", port, "/metricsx");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->status, 404);
  auto root = HttpGet("127.0.0.1", port, "/");
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->status, 404);
  auto post = HttpGet("127.0.0.1", port, "/metrics", "POST");
  ASSERT_TRUE(post.ok()) << post.status();
  EXPECT_EQ(post->status, 405);

  // Concurrent scrapes are all answered.
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto r = HttpGet("127.0.0.1", port, "/metrics");
      if (r.ok() && r->status == 200) ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
}

TEST(MetricsHttpServerTest, APortInUseNamesTheFlag) {
  MetricRegistry registry;
  auto first = MetricsHttpServer::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = MetricsHttpServer::Start("127.0.0.1", (*first)->port(), registry);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("--metrics_port"));
  EXPECT_EQ(MetricsHttpServer::Start("127.0.0.1", 70000, registry).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Whether this machine has IPv6 loopback (some containers have none).
bool HasIpv6Loopback() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return bound;
}

TEST(MetricsHttpServerTest, ServesOnIpv6Loopback) {
  if (!HasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  MetricRegistry registry;
  registry.AddCounter("up_total", "Up.");
  for (const std::string host : {"::1", "[::1]"}) {
    auto server = MetricsHttpServer::Start(host, 0, registry);
    ASSERT_TRUE(server.ok()) << server.status();
    auto response = HttpGet("::1", (*server)->port(), "/metrics");
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 200);
    EXPECT_THAT(response->body, HasSubstr("# TYPE up_total counter"));
  }
  EXPECT_EQ(MetricsHttpServer::Start("metrics.example", 0, registry).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsHttpServerTest, ATokenIsNeededWhenSet) {
  std::mt19937_64 random(std::random_device{}());
  const std::string token = absl::StrCat("metrics-", random(), "-", random());
  MetricRegistry registry;
  registry.AddCounter("up_total", "Up.");
  MetricsHttpOptions options;
  options.bearer_token = token;
  auto server = MetricsHttpServer::Start(options, registry);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  for (const std::string header :
       {std::string(), absl::StrCat("Authorization: Bearer ", token, "x\r\n"),
        absl::StrCat("Authorization: Basic ", token, "\r\n"),
        std::string("Authorization: Bearer\r\n")}) {
    auto refused = HttpGet("127.0.0.1", port, "/metrics", "GET", header);
    ASSERT_TRUE(refused.ok()) << refused.status();
    EXPECT_EQ(refused->status, 401) << header;
    EXPECT_THAT(refused->body, Not(HasSubstr("# TYPE up_total")));
    EXPECT_THAT(refused->body, Not(HasSubstr(token)));
    EXPECT_EQ(refused->headers["www-authenticate"], "Bearer realm=\"tomod\"");
  }
  auto allowed = HttpGet("127.0.0.1", port, "/metrics", "GET",
                         absl::StrCat("Authorization: bearer ", token, "\r\n"));
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_EQ(allowed->status, 200);
  EXPECT_THAT(allowed->body, HasSubstr("# TYPE up_total counter"));
}

// Connections that never send a request hold no thread: a scrape among 50 of them is
// answered at once (the old endpoint had two threads, each stuck on an idle connection
// for its whole time-out), and the idle ones are closed after the idle time-out.
TEST(MetricsHttpServerTest, IdleConnectionsDoNotHoldScrapesBack) {
  MetricRegistry registry;
  registry.AddCounter("up_total", "Up.");
  MetricsHttpOptions options;
  options.idle_timeout = absl::Seconds(2);
  auto server = MetricsHttpServer::Start(options, registry);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::vector<int> idle;
  for (int i = 0; i < 50; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    idle.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  auto response = HttpGet("127.0.0.1", port, "/metrics");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  // Well inside the idle time-out: the scrape did not wait for any idle connection.
  EXPECT_LT(seconds, 1.5);
  // The server closes the idle ones: a read sees the end of the stream.
  timeval timeout{10, 0};
  char byte;
  for (int fd : {idle.front(), idle.back()}) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    EXPECT_EQ(::recv(fd, &byte, 1, 0), 0);
  }
  for (int fd : idle) ::close(fd);
}

}  // namespace
}  // namespace tomo::server

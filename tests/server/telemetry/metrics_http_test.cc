#include "server/telemetry/metrics_http.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/http_get.h"

namespace tomo::server {
namespace {

using ::testing::HasSubstr;
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

}  // namespace
}  // namespace tomo::server

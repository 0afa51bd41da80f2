// A minimal HTTP/1.0 client for tests: one request on a fresh connection, the
// whole response read until the server closes. Enough to scrape tomod's /metrics.
//
//   absl::StatusOr<HttpResponse> r = HttpGet("127.0.0.1", port, "/metrics");
//   EXPECT_EQ(r->status, 200);
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace tomo::testing {

struct HttpResponse {
  int status = 0;
  // Header names lower-cased.
  std::map<std::string, std::string> headers;
  std::string body;
};

// host: an IPv4 or IPv6 address (no brackets). extra_headers: whole header lines, each
// ending "\r\n" (e.g. "Authorization: Bearer x\r\n").
absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port, const std::string& path,
                                     const std::string& method = "GET",
                                     const std::string& extra_headers = "");

// The samples of a Prometheus text exposition: "name{labels}" exactly as written -> value.
// Comment lines are skipped.
std::map<std::string, double> ParseSamples(const std::string& text);

}  // namespace tomo::testing

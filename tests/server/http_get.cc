#include "tests/server/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tomo::testing {

absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port, const std::string& path,
                                     const std::string& method,
                                     const std::string& extra_headers) {
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  const bool ipv6 = ::inet_pton(AF_INET, host.c_str(), &v4.sin_addr) != 1;
  if (ipv6 && ::inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(host, " is not an IP address"));
  }
  v4.sin_family = AF_INET;
  v4.sin_port = htons(static_cast<uint16_t>(port));
  v6.sin6_family = AF_INET6;
  v6.sin6_port = htons(static_cast<uint16_t>(port));
  const int fd = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const int connected =
      ipv6 ? ::connect(fd, reinterpret_cast<sockaddr*>(&v6), sizeof(v6))
           : ::connect(fd, reinterpret_cast<sockaddr*>(&v4), sizeof(v4));
  if (connected != 0) {
    const int error = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("connect to ", host, ":", port, ": ", std::strerror(error)));
  }
  const std::string request =
      absl::StrCat(method, " ", path, " HTTP/1.0\r\nHost: ", ipv6 ? absl::StrCat("[", host, "]") : host,
                   "\r\n", extra_headers, "\r\n");
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string raw;
  char buffer[65536];
  for (;;) {
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    raw.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) {
    return absl::DataLossError(absl::StrCat("no complete HTTP header in: ", raw));
  }
  HttpResponse response;
  std::vector<std::string> lines = absl::StrSplit(raw.substr(0, end), "\r\n");
  std::vector<std::string> status_line = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &response.status)) {
    return absl::DataLossError(absl::StrCat("bad status line: ", lines[0]));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    response.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  response.body = raw.substr(end + 4);
  return response;
}

std::map<std::string, double> ParseSamples(const std::string& text) {
  std::map<std::string, double> samples;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    const std::string value(line.substr(space + 1));
    double number = 0;
    if (value == "+Inf") {
      number = HUGE_VAL;
    } else if (value == "-Inf") {
      number = -HUGE_VAL;
    } else if (!absl::SimpleAtod(value, &number)) {
      continue;
    }
    samples[std::string(line.substr(0, space))] = number;
  }
  return samples;
}

}  // namespace tomo::testing

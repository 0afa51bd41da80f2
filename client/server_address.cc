#include "client/server_address.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tomo::client {
namespace {

absl::Status Bad(absl::string_view address, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("server address \"", address, "\": ", why));
}

}  // namespace

absl::StatusOr<std::string> ServerTarget(absl::string_view address) {
  const absl::string_view given = address;
  address = absl::StripAsciiWhitespace(address);
  if (address.empty()) return Bad(given, "empty; expected host[:port]");
  for (absl::string_view grpc_scheme : {"unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(address, grpc_scheme)) return std::string(address);
  }
  const std::string lower = absl::AsciiStrToLower(address.substr(0, 8));
  if (absl::StartsWith(lower, "https://")) {
    return Bad(given, "https:// asks for TLS: give host:port and the TLS options (tomo --help)");
  }
  for (absl::string_view scheme : {"http://", "grpc://"}) {
    if (absl::StartsWith(lower, scheme)) address.remove_prefix(scheme.size());
  }
  while (absl::EndsWith(address, "/")) address.remove_suffix(1);
  if (address.empty()) return Bad(given, "no host; expected host[:port]");
  if (address.find('/') != absl::string_view::npos) {
    return Bad(given, "a path after the host; expected host[:port]");
  }
  // The port: after the last ':' outside an IPv6 literal's brackets.
  absl::string_view host = address, port;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) return Bad(given, "an IPv6 address without its ']'");
    host = address.substr(0, close + 1);
    absl::string_view rest = address.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return Bad(given, "expected ':port' after the IPv6 address");
      port = rest.substr(1);
    }
  } else if (const size_t colon = address.rfind(':'); colon != absl::string_view::npos) {
    if (address.find(':') != colon) {
      return Bad(given, "an IPv6 address needs brackets, e.g. [::1]:50051");
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.empty()) return Bad(given, "no host before the port");
  }
  if (port.empty()) return absl::StrCat(host, ":", kDefaultTomodPort);
  int number = 0;
  if (!absl::SimpleAtoi(port, &number) || number < 1 || number > 65535) {
    return Bad(given, absl::StrCat("port \"", port, "\" is not a number in [1, 65535]"));
  }
  return absl::StrCat(host, ":", number);
}

}  // namespace tomo::client

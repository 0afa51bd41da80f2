#include "client/channel_security.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tomo::client {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& what, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(error));
    if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(message);
    return absl::NotFoundError(message);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::string> ReadPem(const std::string& what, const std::string& path,
                                    absl::string_view kind) {
  absl::StatusOr<std::string> text = ReadFile(what, path);
  if (!text.ok()) return text.status();
  // "-----BEGIN CERTIFICATE-----", "-----BEGIN PRIVATE KEY-----", "-----BEGIN EC PRIVATE
  // KEY-----", ...: gRPC checks the contents; this names the file that is plainly wrong.
  if (!absl::StrContains(*text, "-----BEGIN ") || !absl::StrContains(*text, kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": holds no PEM ", absl::AsciiStrToLower(kind)));
  }
  return text;
}

class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string& header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", header_});
    }
    methods->Proceed();
  }

 private:
  const std::string& header_;  // the factory's, which outlives the channel's calls
};

class BearerTokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(const std::string& token)
      : header_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerTokenInterceptor(header_);
  }

 private:
  const std::string header_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientTlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        files.cert_file.empty() ? "TLS key " : "TLS certificate ",
        files.cert_file.empty() ? files.key_file : files.cert_file, ": given without ",
        files.cert_file.empty() ? "its certificate (--tls-cert, TOMO_TLS_CERT)"
                                : "its key (--tls-key, TOMO_TLS_KEY)"));
  }
  grpc::SslCredentialsOptions options;
  if (!files.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem("TLS CA", files.ca_file, "CERTIFICATE");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
  }
  if (!files.cert_file.empty()) {
    absl::StatusOr<std::string> cert =
        ReadPem("TLS certificate", files.cert_file, "CERTIFICATE");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem("TLS key", files.key_file, "PRIVATE KEY");
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *cert;
    options.pem_private_key = *key;
  }
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile("token file", path);
  if (!text.ok()) return text.status();
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": is empty"));
  }
  for (char c : token) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) ||
        absl::ascii_iscntrl(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token file ", path, ": holds white space or control characters inside the token; "
                               "it must hold the token alone"));
    }
  }
  return token;
}

std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
BearerTokenInterceptors(const std::string& token) {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<BearerTokenInterceptorFactory>(token));
  return factories;
}

}  // namespace tomo::client

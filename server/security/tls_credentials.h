// tomod's TLS: the server credentials of --tls_cert_file, --tls_key_file and
// --tls_client_ca_file, read and checked before the server starts.
//
// With a certificate and key the server speaks TLS only. With a client CA as well, it is
// mutual TLS: every client must present a certificate that chains to that CA (and is
// within its validity dates), else the handshake fails before any call; the certificate's
// name can then name the tenant (authenticator.h).
//
// The files are PEM: the certificate file may hold the chain (server certificate first);
// the key must be the certificate's (checked here, so a mismatch is a clear error, not a
// failed handshake later). An expired or not yet valid server certificate is refused.
//
//   ServerTlsFiles files{"/etc/tomod/server.crt", "/etc/tomod/server.key", "/etc/tomod/ca.crt"};
//   TOMO_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
//                         MakeServerCredentials(files));
//
// Errors name the flag and the path: NOT_FOUND / PERMISSION_DENIED when a file cannot be
// read, INVALID_ARGUMENT for contents that are not what the flag needs (no PEM
// certificate, no private key, a key not matching the certificate, only one of the
// certificate and key, a client CA without them), FAILED_PRECONDITION for a server
// certificate outside its validity dates. Pure; thread-safe.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"

namespace tomo::server {

struct ServerTlsFiles {
  std::string cert_file;       // --tls_cert_file
  std::string key_file;        // --tls_key_file
  std::string client_ca_file;  // --tls_client_ca_file; empty: no client certificates

  bool tls() const { return !cert_file.empty() || !key_file.empty(); }
  bool mutual() const { return !client_ca_file.empty(); }
};

// The files' contents, checked as above.
struct ServerTlsPem {
  std::string cert_chain;
  std::string private_key;
  std::string client_ca;  // empty: no client certificates
};
absl::StatusOr<ServerTlsPem> ReadServerTls(const ServerTlsFiles& files);

// Credentials serving the files as they are now (tomod serves them through ReloadableTls,
// tls_reload.h, so that SIGHUP can replace them).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files);

}  // namespace tomo::server

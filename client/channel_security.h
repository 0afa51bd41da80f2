// How a tomod client proves who it is and checks whom it talks to: TLS channel credentials
// from PEM files, and the bearer token every call carries.
//
//   TLS            MakeChannelCredentials({ca_file, cert_file, key_file}): the server's
//                  certificate must chain to ca_file (empty: the system's trusted roots)
//                  and name the address dialled; cert_file and key_file (both or neither)
//                  are the client certificate for mutual TLS.
//   bearer token   ClientOptions::bearer_token (tomo_client.h): every call of the client,
//                  the striped transfers' extra channels included, carries
//                  `authorization: Bearer <token>` metadata (BearerTokenInterceptors).
//                  ReadTokenFile reads one from a file (the tomo CLI: TOMO_TOKEN,
//                  --token-file, TOMO_TOKEN_FILE).
//
//   TOMO_ASSIGN_OR_RETURN(options.credentials,
//                         MakeChannelCredentials({"ca.crt", "client.crt", "client.key"}));
//   TOMO_ASSIGN_OR_RETURN(options.bearer_token, ReadTokenFile("/run/secrets/tomo-token"));
//   TomoClient client("tomod.lab:50051", options);
//
// Errors name the file (and the option when one is given): NOT_FOUND or PERMISSION_DENIED
// when it cannot be read, INVALID_ARGUMENT for one that holds no PEM block of the kind
// needed, for only one of cert_file and key_file, or for an empty token. The token never
// appears in an error. Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/client_interceptor.h"

namespace tomo::client {

struct ClientTlsFiles {
  std::string ca_file;    // PEM CA certificate(s); empty: the system's trusted roots
  std::string cert_file;  // PEM client certificate (mutual TLS); empty: none
  std::string key_file;   // its PEM private key
};

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ClientTlsFiles& files);

// The token in path: its text without surrounding white space (INVALID_ARGUMENT when empty
// or when it has white space inside).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Interceptor factories that add `authorization: Bearer <token>` to every call of a channel
// (grpc::experimental::CreateCustomChannelWithInterceptors).
std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
BearerTokenInterceptors(const std::string& token);

}  // namespace tomo::client

// ReloadableTls: tomod's TLS credentials (tls_credentials.h), read again on SIGHUP like the
// tokens file, so that a renewed certificate needs no restart.
//
// gRPC serves the certificate, key and client CA from a private copy that its file watcher
// (grpc::experimental::FileWatcherCertificateProvider) reads every second: in copy_dir (mode
// 0700), `current` links to a folder vN holding cert.pem, key.pem and ca.pem (mode 0600).
// Reload reads the flag files again and checks them as at start (a key of the certificate,
// within its dates, a CA that holds a certificate); only when they pass is a new folder
// written and `current` renamed over to it, the way gRPC's watcher asks for atomic updates
// (a handshake never pairs one version's key with another's certificate). A file that
// does not pass keeps the certificates in force and is logged. Connections made about a
// second after a good reload get the new certificate; open ones keep theirs. The files of
// version N carry the modification time N (seconds after 1970), so that the watcher, which
// reads the key and the certificate one after the other and compares their modification
// times before and after, sees a swap between the two reads whatever the clock.
//
//   TOMO_ASSIGN_OR_RETURN(auto tls, ReloadableTls::Create(files, spool + "/tls"));
//   builder.AddListeningPort(address, tls->credentials());
//   ...  // on SIGHUP:
//   tls->Reload().IgnoreError();  // logged
//
// Thread-safe.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/security/tls_credentials.h"

namespace tomo::server {

class ReloadableTls {
 public:
  // The files' errors as ReadServerTls's; INTERNAL naming copy_dir when the copy cannot be
  // written. copy_dir's earlier contents are removed.
  static absl::StatusOr<std::unique_ptr<ReloadableTls>> Create(const ServerTlsFiles& files,
                                                               std::string copy_dir);
  // Removes the copy.
  ~ReloadableTls();
  ReloadableTls(const ReloadableTls&) = delete;
  ReloadableTls& operator=(const ReloadableTls&) = delete;

  std::shared_ptr<grpc::ServerCredentials> credentials() const { return credentials_; }
  // Reads the files again; when they pass, handshakes from about a second later use them.
  // Logged (event "tls_reload") either way; an error keeps the certificates in force.
  absl::Status Reload();

 private:
  ReloadableTls(ServerTlsFiles files, std::string copy_dir)
      : files_(std::move(files)), dir_(std::move(copy_dir)) {}
  // Writes version_ + 1 and points `current` at it; removes the version before the last.
  absl::Status WriteCopy(const ServerTlsPem& pem) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Current(const char* name) const { return dir_ + "/current/" + name; }

  const ServerTlsFiles files_;
  const std::string dir_;
  absl::Mutex mu_;
  int version_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<grpc::experimental::FileWatcherCertificateProvider> provider_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
};

}  // namespace tomo::server

#include "server/security/tls_reload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "server/telemetry/log.h"

namespace tomo::server {
namespace {

namespace fs = std::filesystem;

// How often gRPC's watcher reads the copy (its minimum).
constexpr unsigned int kWatchIntervalSeconds = 1;

absl::Status CopyError(const std::string& what, const std::string& path, int error) {
  return absl::InternalError(
      absl::StrCat("TLS: cannot ", what, " ", path, ": ", std::strerror(error)));
}

// path (new, mode 0600) holding bytes, modified at `version` seconds after 1970.
absl::Status WriteFile(const std::string& path, const std::string& bytes, int version) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return CopyError("create", path, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return CopyError("write", path, error);
    }
    done += static_cast<size_t>(n);
  }
  const struct timespec times[2] = {{version, 0}, {version, 0}};
  const bool stamped = ::futimens(fd, times) == 0;
  const int error = errno;
  ::close(fd);
  if (!stamped) return CopyError("set the time of", path, error);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReloadableTls>> ReloadableTls::Create(const ServerTlsFiles& files,
                                                                     std::string copy_dir) {
  TOMO_ASSIGN_OR_RETURN(ServerTlsPem pem, ReadServerTls(files));
  std::unique_ptr<ReloadableTls> tls(new ReloadableTls(files, std::move(copy_dir)));
  std::error_code error;
  fs::remove_all(tls->dir_, error);
  if (::mkdir(tls->dir_.c_str(), 0700) != 0) return CopyError("create", tls->dir_, errno);
  {
    absl::MutexLock lock(&tls->mu_);
    TOMO_RETURN_IF_ERROR(tls->WriteCopy(pem));
  }
  // The watcher reads the copy once here, then every kWatchIntervalSeconds.
  if (files.mutual()) {
    tls->provider_ = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        tls->Current("key.pem"), tls->Current("cert.pem"), tls->Current("ca.pem"),
        kWatchIntervalSeconds);
  } else {
    tls->provider_ = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        tls->Current("key.pem"), tls->Current("cert.pem"), kWatchIntervalSeconds);
  }
  grpc::experimental::TlsServerCredentialsOptions options(tls->provider_);
  options.watch_identity_key_cert_pairs();
  if (files.mutual()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  tls->credentials_ = grpc::experimental::TlsServerCredentials(options);
  if (tls->credentials_ == nullptr) {
    return absl::InternalError("TLS: gRPC made no server credentials of the certificate");
  }
  return tls;
}

ReloadableTls::~ReloadableTls() {
  provider_.reset();  // its watcher thread stops (the server, holding the credentials, is gone)
  std::error_code error;
  fs::remove_all(dir_, error);
}

absl::Status ReloadableTls::WriteCopy(const ServerTlsPem& pem) {
  const int version = version_ + 1;
  const std::string name = absl::StrCat("v", version);
  const std::string folder = absl::StrCat(dir_, "/", name);
  std::error_code error;
  fs::remove_all(folder, error);
  if (::mkdir(folder.c_str(), 0700) != 0) return CopyError("create", folder, errno);
  TOMO_RETURN_IF_ERROR(WriteFile(folder + "/key.pem", pem.private_key, version));
  TOMO_RETURN_IF_ERROR(WriteFile(folder + "/cert.pem", pem.cert_chain, version));
  if (!pem.client_ca.empty()) {
    TOMO_RETURN_IF_ERROR(WriteFile(folder + "/ca.pem", pem.client_ca, version));
  }
  const std::string link = dir_ + "/current";
  const std::string next = dir_ + "/current.next";
  ::unlink(next.c_str());
  if (::symlink(name.c_str(), next.c_str()) != 0) return CopyError("link", next, errno);
  if (::rename(next.c_str(), link.c_str()) != 0) return CopyError("rename", next, errno);
  version_ = version;
  // The version before the last one may still be read by a watcher that resolved the link
  // just before the rename; older ones by nobody.
  if (version > 2) fs::remove_all(absl::StrCat(dir_, "/v", version - 2), error);
  return absl::OkStatus();
}

absl::Status ReloadableTls::Reload() {
  absl::Status status;
  absl::StatusOr<ServerTlsPem> pem = ReadServerTls(files_);
  if (pem.ok()) {
    absl::MutexLock lock(&mu_);
    status = WriteCopy(*pem);
  } else {
    status = pem.status();
  }
  if (status.ok()) {
    LogEvent(LogLevel::kInfo, "tls_reload", "",
             {{"message", "SIGHUP: TLS certificate and key read again; new connections get "
                          "them within a second"},
              {"cert_file", files_.cert_file}});
  } else {
    LogEvent(LogLevel::kWarning, "tls_reload", "",
             {{"message", absl::StrCat("SIGHUP: TLS not reloaded, the certificates in force "
                                       "stay: ", status.message())}});
  }
  return status;
}

}  // namespace tomo::server

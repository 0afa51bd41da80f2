#include "server/security/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace tomo::server {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    const std::string message = absl::StrCat(flag, "=", path, ": ", std::strerror(error));
    if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(message);
    return absl::NotFoundError(message);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The PEM certificates in pem, in order.
std::vector<Cert> Certificates(const std::string& pem) {
  std::vector<Cert> certs;
  Bio bio = MemoryBio(pem);
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // the end of the input reads as an error
  return certs;
}

}  // namespace

absl::StatusOr<ServerTlsPem> ReadServerTls(const ServerTlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        files.cert_file.empty() ? "--tls_key_file" : "--tls_cert_file",
        " is set without ", files.cert_file.empty() ? "--tls_cert_file" : "--tls_key_file",
        "; TLS needs both the server certificate and its key"));
  }
  if (!files.tls()) {
    return absl::InvalidArgumentError(
        "--tls_client_ca_file is set without --tls_cert_file and --tls_key_file; mutual TLS "
        "needs the server's certificate and key too");
  }
  TOMO_ASSIGN_OR_RETURN(std::string cert_pem, ReadFile("--tls_cert_file", files.cert_file));
  TOMO_ASSIGN_OR_RETURN(std::string key_pem, ReadFile("--tls_key_file", files.key_file));
  std::vector<Cert> chain = Certificates(cert_pem);
  if (chain.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--tls_cert_file=", files.cert_file,
                                                   ": holds no PEM certificate"));
  }
  Bio key_bio = MemoryBio(key_pem);
  Key key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key_file=", files.key_file, ": holds no PEM private key (or it is encrypted)"));
  }
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat("--tls_key_file=", files.key_file,
                                                   ": is not the key of the certificate in "
                                                   "--tls_cert_file=", files.cert_file));
  }
  const X509* leaf = chain.front().get();
  if (X509_cmp_current_time(X509_get0_notAfter(leaf)) <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--tls_cert_file=", files.cert_file,
                     ": the certificate has expired; clients would refuse it"));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(leaf)) >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--tls_cert_file=", files.cert_file,
                     ": the certificate is not valid yet; clients would refuse it"));
  }
  ServerTlsPem pem{std::move(cert_pem), std::move(key_pem), ""};
  if (files.mutual()) {
    TOMO_ASSIGN_OR_RETURN(pem.client_ca, ReadFile("--tls_client_ca_file", files.client_ca_file));
    if (Certificates(pem.client_ca).empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls_client_ca_file=", files.client_ca_file, ": holds no PEM certificate"));
    }
  }
  return pem;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files) {
  TOMO_ASSIGN_OR_RETURN(ServerTlsPem pem, ReadServerTls(files));
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({pem.private_key, pem.cert_chain});
  if (files.mutual()) {
    options.pem_root_certs = pem.client_ca;
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  } else {
    options.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace tomo::server

#include "tests/server/security/test_certificates.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"

#ifndef TOMO_SOURCE_DIR
#error "TOMO_SOURCE_DIR must name the source tree (for scripts/dev-certs)"
#endif

namespace tomo::testing {
namespace {

// Runs command with sh; its output goes into the error when it fails.
absl::Status Run(const std::string& command) {
  std::string output;
  FILE* pipe = popen(absl::StrCat(command, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("cannot run: ", command));
  char buffer[4096];
  while (size_t got = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, got);
  const int status = pclose(pipe);
  if (status != 0) {
    return absl::InternalError(absl::StrCat("`", command, "` failed (", status, "): ", output));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeDevCertificates(const std::string& dir, const std::string& client) {
  return Run(absl::StrCat(TOMO_SOURCE_DIR, "/scripts/dev-certs --client '", client, "' '", dir,
                          "'"));
}

absl::Status MakeExpiredCertificate(const std::string& dir, const std::string& name) {
  // `openssl x509 -days` takes no past dates; `openssl ca` takes explicit ones.
  const std::string ca_dir = absl::StrCat(dir, "/", name, ".ca");
  {
    std::ofstream config(absl::StrCat(dir, "/", name, ".cnf"));
    config << "[ca]\ndefault_ca = d\n[d]\ndatabase = " << ca_dir << "/index.txt\n"
           << "new_certs_dir = " << ca_dir << "\nserial = " << ca_dir << "/serial\n"
           << "default_md = sha256\npolicy = p\nunique_subject = no\n"
           << "copy_extensions = none\nx509_extensions = e\n"
           << "[p]\ncommonName = supplied\n"
           << "[e]\nbasicConstraints = CA:FALSE\n"
           << "extendedKeyUsage = serverAuth, clientAuth\n"
           << "subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1\n";
  }
  const std::string d = absl::StrCat("'", dir, "'");
  return Run(absl::StrCat(
      "set -e; mkdir -p '", ca_dir, "'; : > '", ca_dir, "/index.txt'; echo 01 > '", ca_dir,
      "/serial'; ", "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ", d,
      "/", name, ".key; ", "openssl req -new -key ", d, "/", name, ".key -subj /CN=", name,
      " -out ", d, "/", name, ".csr; ", "openssl ca -batch -notext -config ", d, "/", name,
      ".cnf -cert ", d, "/ca.crt -keyfile ", d, "/ca.key -in ", d, "/", name, ".csr -out ", d,
      "/", name, ".crt -startdate 20200101000000Z -enddate 20200102000000Z"));
}

}  // namespace tomo::testing

// Certificates for the TLS tests, made with scripts/dev-certs and openssl in a directory:
//
//   TOMO_ASSERT_OK(MakeDevCertificates(dir, "lab-a"));   // ca, server, lab-a (CN=lab-a)
//   TOMO_ASSERT_OK(MakeExpiredCertificate(dir, "old"));  // old.crt/.key, CA-signed, 2020
//
// Each returns a status naming the command that failed and its output.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace tomo::testing {

// scripts/dev-certs --client client DIR: DIR/ca.*, DIR/server.*, DIR/<client>.*.
absl::Status MakeDevCertificates(const std::string& dir, const std::string& client = "client");

// DIR/<name>.crt and .key, signed by DIR's CA (made by MakeDevCertificates), CN=<name>,
// valid only on 1 January 2020; usable as a server certificate for localhost and 127.0.0.1
// and as a client certificate.
absl::Status MakeExpiredCertificate(const std::string& dir, const std::string& name);

}  // namespace tomo::testing

#include "server/security/tls_credentials.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/security/test_certificates.h"

namespace tomo::server {
namespace {

using ::testing::HasSubstr;

class TlsCredentialsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(
        (std::filesystem::temp_directory_path() / absl::StrCat("tls_credentials_test_", getpid()))
            .string());
    std::filesystem::create_directories(*dir_);
    absl::Status made = testing::MakeDevCertificates(*dir_);
    ASSERT_TRUE(made.ok()) << made;
    made = testing::MakeExpiredCertificate(*dir_, "old");
    ASSERT_TRUE(made.ok()) << made;
    other_ = new std::string(*dir_ + "/other");
    made = testing::MakeDevCertificates(*other_);
    ASSERT_TRUE(made.ok()) << made;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete other_;
  }
  static std::string File(const std::string& name) { return *dir_ + "/" + name; }

  static std::string* dir_;
  static std::string* other_;
};
std::string* TlsCredentialsTest::dir_ = nullptr;
std::string* TlsCredentialsTest::other_ = nullptr;

TEST_F(TlsCredentialsTest, ServerCertificateAndKeyWithAndWithoutAClientCa) {
  EXPECT_TRUE(MakeServerCredentials({File("server.crt"), File("server.key"), ""}).ok());
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> mutual =
      MakeServerCredentials({File("server.crt"), File("server.key"), File("ca.crt")});
  ASSERT_TRUE(mutual.ok()) << mutual.status();
  EXPECT_NE(*mutual, nullptr);
}

TEST_F(TlsCredentialsTest, KeyOfAnotherCertificateIsRefusedNamingBothFlags) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials({File("server.crt"), *other_ + "/server.key", ""});
  ASSERT_FALSE(credentials.ok());
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(credentials.status().message(),
              HasSubstr(absl::StrCat("--tls_key_file=", *other_, "/server.key: is not the key")));
  EXPECT_THAT(credentials.status().message(), HasSubstr("--tls_cert_file="));
}

TEST_F(TlsCredentialsTest, ExpiredServerCertificateIsRefused) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials({File("old.crt"), File("old.key"), ""});
  ASSERT_FALSE(credentials.ok());
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(credentials.status().message(), HasSubstr("has expired"));
}

TEST_F(TlsCredentialsTest, MissingOrWrongFilesAreNamed) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials({File("server.crt"), "", ""});
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(credentials.status().message(), HasSubstr("--tls_cert_file is set without"));
  credentials = MakeServerCredentials({"", "", File("ca.crt")});
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(credentials.status().message(), HasSubstr("--tls_client_ca_file is set without"));
  credentials = MakeServerCredentials({File("absent.crt"), File("server.key"), ""});
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(credentials.status().message(), HasSubstr(File("absent.crt")));
  // A key where the certificate should be, and the other way round.
  credentials = MakeServerCredentials({File("server.key"), File("server.key"), ""});
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(credentials.status().message(), HasSubstr("holds no PEM certificate"));
  credentials = MakeServerCredentials({File("server.crt"), File("server.crt"), ""});
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(credentials.status().message(), HasSubstr("holds no PEM private key"));
  credentials = MakeServerCredentials({File("server.crt"), File("server.key"), File("ca.key")});
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(credentials.status().message(), HasSubstr("--tls_client_ca_file="));
}

}  // namespace
}  // namespace tomo::server

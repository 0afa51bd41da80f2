#include "server/security/tls_reload.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/security/test_certificates.h"

namespace tomo::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

mode_t Mode(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 ? (info.st_mode & 0777) : 0;
}

class ReloadableTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / absl::StrCat("tls_reload_test_", getpid())).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    absl::Status made = testing::MakeDevCertificates(dir_ + "/first");
    ASSERT_TRUE(made.ok()) << made;
    made = testing::MakeDevCertificates(dir_ + "/second");
    ASSERT_TRUE(made.ok()) << made;
    fs::create_directories(dir_ + "/served");
    Serve("first");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The flag files hold `which`'s server certificate, key and CA.
  void Serve(const std::string& which) {
    for (const char* name : {"server.crt", "server.key", "ca.crt"}) {
      fs::copy_file(dir_ + "/" + which + "/" + name, dir_ + "/served/" + name,
                    fs::copy_options::overwrite_existing);
    }
  }
  ServerTlsFiles Files() const {
    return {dir_ + "/served/server.crt", dir_ + "/served/server.key", dir_ + "/served/ca.crt"};
  }
  std::string Copy(const std::string& name) const { return dir_ + "/copy/current/" + name; }

  std::string dir_;
};

// The copy is private and holds what the flag files held; a good reload replaces it, a
// bad one (a key of another certificate) leaves it; destruction removes it.
TEST_F(ReloadableTlsTest, ACopyOfGoodFilesOnlyAndRemovedAtTheEnd) {
  absl::StatusOr<std::unique_ptr<ReloadableTls>> tls =
      ReloadableTls::Create(Files(), dir_ + "/copy");
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_NE((*tls)->credentials(), nullptr);
  EXPECT_EQ(Mode(dir_ + "/copy"), 0700u);
  EXPECT_EQ(Mode(Copy("key.pem")), 0600u);
  EXPECT_EQ(Read(Copy("key.pem")), Read(dir_ + "/first/server.key"));
  EXPECT_EQ(Read(Copy("cert.pem")), Read(dir_ + "/first/server.crt"));
  EXPECT_EQ(Read(Copy("ca.pem")), Read(dir_ + "/first/ca.crt"));

  Serve("second");
  ASSERT_TRUE((*tls)->Reload().ok());
  EXPECT_EQ(Read(Copy("key.pem")), Read(dir_ + "/second/server.key"));
  EXPECT_EQ(Read(Copy("cert.pem")), Read(dir_ + "/second/server.crt"));
  EXPECT_EQ(Read(Copy("ca.pem")), Read(dir_ + "/second/ca.crt"));

  fs::copy_file(dir_ + "/first/server.key", dir_ + "/served/server.key",
                fs::copy_options::overwrite_existing);
  const absl::Status refused = (*tls)->Reload();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("is not the key of the certificate"));
  EXPECT_EQ(Read(Copy("key.pem")), Read(dir_ + "/second/server.key"));
  EXPECT_EQ(Read(Copy("cert.pem")), Read(dir_ + "/second/server.crt"));

  // Many reloads keep two versions at most.
  Serve("first");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*tls)->Reload().ok());
  int versions = 0;
  for (const auto& entry : fs::directory_iterator(dir_ + "/copy")) {
    if (entry.path().filename().string()[0] == 'v') ++versions;
  }
  EXPECT_LE(versions, 2);
  tls->reset();
  EXPECT_FALSE(fs::exists(dir_ + "/copy"));
}

TEST_F(ReloadableTlsTest, BadFilesAtTheStartAreRefusedAsReadServerTlsRefusesThem) {
  absl::StatusOr<std::unique_ptr<ReloadableTls>> tls = ReloadableTls::Create(
      {dir_ + "/served/server.crt", dir_ + "/second/server.key", ""}, dir_ + "/copy");
  ASSERT_FALSE(tls.ok());
  EXPECT_THAT(tls.status().message(), HasSubstr("--tls_key_file="));
  EXPECT_FALSE(fs::exists(dir_ + "/copy"));
}

}  // namespace
}  // namespace tomo::server

#include "server/security/tokens_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string RandomToken(std::mt19937_64& random) {
  std::uniform_int_distribution<int> hex(0, 15);
  std::string token;
  for (int i = 0; i < 40; ++i) token += "0123456789abcdef"[hex(random)];
  return token;
}

class TokensFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("tokens_file_test_", getpid(), "_", random_());
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "tokens").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const std::string& text, mode_t mode) {
    // Through a new file renamed over the old one, as an editor or a secret mount would.
    const std::string next = path_ + ".next";
    {
      std::ofstream out(next, std::ios::trunc);
      out << text;
    }
    ASSERT_EQ(chmod(next.c_str(), mode), 0);
    std::filesystem::rename(next, path_);
  }

  std::mt19937_64 random_{std::random_device{}()};
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(TokensFileTest, ReadsAFileOnlyItsOwnerOrGroupMayRead) {
  const std::string token = RandomToken(random_);
  for (mode_t mode : {0600, 0640, 0400, 0440}) {
    Write(absl::StrCat(token, " lab-a user\n"), mode);
    absl::StatusOr<std::unique_ptr<TokensFile>> tokens = TokensFile::Open(path_);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    ASSERT_TRUE((*tokens)->Find(token).has_value());
    EXPECT_EQ((*tokens)->Find(token)->tenant, "lab-a");
  }
}

TEST_F(TokensFileTest, RefusesAFileOthersMayReadOrTheGroupMayWrite) {
  const std::string token = RandomToken(random_);
  for (mode_t mode : {0644, 0604, 0660, 0602, 0666}) {
    Write(absl::StrCat(token, " lab-a user\n"), mode);
    absl::StatusOr<std::unique_ptr<TokensFile>> tokens = TokensFile::Open(path_);
    ASSERT_FALSE(tokens.ok()) << std::oct << mode;
    EXPECT_EQ(tokens.status().code(), absl::StatusCode::kFailedPrecondition);
    char text[8];
    std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode));
    EXPECT_THAT(tokens.status().message(), HasSubstr(absl::StrCat("mode ", text)));
    EXPECT_THAT(tokens.status().message(), HasSubstr(path_));
    EXPECT_THAT(tokens.status().message(), Not(HasSubstr(token)));
  }
}

TEST_F(TokensFileTest, MissingFileIsNotFoundNamingIt) {
  absl::StatusOr<std::unique_ptr<TokensFile>> tokens = TokensFile::Open(path_);
  ASSERT_FALSE(tokens.ok());
  EXPECT_EQ(tokens.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(tokens.status().message(), HasSubstr(absl::StrCat("--tokens_file=", path_)));
}

TEST_F(TokensFileTest, ReloadTakesTheNewTableAndKeepsTheOldOneWhenTheFileIsBad) {
  const std::string first = RandomToken(random_), second = RandomToken(random_);
  Write(absl::StrCat(first, " lab-a user\n"), 0600);
  absl::StatusOr<std::unique_ptr<TokensFile>> opened = TokensFile::Open(path_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  TokensFile& tokens = **opened;

  // Revoke the first, add the second.
  Write(absl::StrCat(second, " lab-b admin\n"), 0600);
  ASSERT_TRUE(tokens.Reload().ok());
  EXPECT_FALSE(tokens.Find(first).has_value());
  ASSERT_TRUE(tokens.Find(second).has_value());
  EXPECT_EQ(tokens.Find(second)->role, Role::kAdmin);

  // A broken file, a refused mode and a missing file each leave the table in force.
  Write(absl::StrCat(first, " lab-a superuser\n"), 0600);
  absl::Status reloaded = tokens.Reload();
  EXPECT_EQ(reloaded.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(reloaded.message(), Not(HasSubstr(first)));
  Write(absl::StrCat(first, " lab-a user\n"), 0644);
  EXPECT_EQ(tokens.Reload().code(), absl::StatusCode::kFailedPrecondition);
  std::filesystem::remove(path_);
  EXPECT_EQ(tokens.Reload().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(tokens.Find(first).has_value());
  EXPECT_TRUE(tokens.Find(second).has_value());
  EXPECT_EQ(tokens.size(), 1u);
}

}  // namespace
}  // namespace tomo::server

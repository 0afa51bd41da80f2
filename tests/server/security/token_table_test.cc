#include "server/security/token_table.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A fresh token of printable characters (some '#', which only starts whole-line comments:
// never the first, since a line that begins with '#' is a comment, token or not).
std::string RandomToken(std::mt19937_64& random, size_t size = 32) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789#+/=_-";
  std::uniform_int_distribution<size_t> pick(0, sizeof(kChars) - 2);
  std::string token;
  while (token.size() < size) {
    const char c = kChars[pick(random)];
    if (!(token.empty() && c == '#')) token += c;
  }
  return token;
}

TEST(TokenTableTest, FindsEachTokensTenantAndRole) {
  std::mt19937_64 random(std::random_device{}());
  const std::string a = RandomToken(random), b = RandomToken(random, 100),
                    c = RandomToken(random, kMinTokenBytes);
  const std::string text = absl::StrCat("# token tenant role\n\n", a, " lab-a user\n",
                                        "   ", b, "\tlab-a\t admin  \r\n", "  # comment\n", c,
                                        " ops.team_2 user");
  absl::StatusOr<TokenTable> table = TokenTable::Parse(text, "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 3u);
  EXPECT_EQ(table->tenant_count(), 2u);
  std::optional<Principal> found = table->Find(a);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->tenant, "lab-a");
  EXPECT_EQ(found->role, Role::kUser);
  found = table->Find(b);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->tenant, "lab-a");
  EXPECT_EQ(found->role, Role::kAdmin);
  found = table->Find(c);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->tenant, "ops.team_2");
  EXPECT_FALSE(table->Find(RandomToken(random)).has_value());
  EXPECT_FALSE(table->Find(a.substr(1)).has_value());
  EXPECT_FALSE(table->Find("").has_value());
}

TEST(TokenTableTest, EmptyTextAndCommentsOnlyFindNothing) {
  absl::StatusOr<TokenTable> table = TokenTable::Parse("\n# nothing yet\n\n", "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 0u);
}

TEST(TokenTableTest, ErrorsNameTheLineAndNeverTheToken) {
  std::mt19937_64 random(std::random_device{}());
  const std::string token = RandomToken(random);
  struct Case {
    std::string line;
    std::string expected;
  };
  const Case cases[] = {
      {absl::StrCat(token, " lab-a"), "2 fields; expected 3"},
      {absl::StrCat(token, " lab-a user extra"), "4 fields; expected 3"},
      {absl::StrCat(token.substr(0, kMinTokenBytes - 1), " lab-a user"), "token: length 15"},
      {absl::StrCat(token, " lab/a user"), "outside [A-Za-z0-9._-]"},
      {absl::StrCat(token, " ", std::string(kMaxTenantBytes + 1, 't'), " user"),
       "tenant: length 65"},
      {absl::StrCat(token, " lab-a root"), "role: \"root\" is not one of user, admin"},
      {absl::StrCat(token, " lab-a User"), "is not one of user, admin"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TokenTable> table =
        TokenTable::Parse(absl::StrCat("# header\n", c.line, "\n"), "/etc/tomod/tokens");
    ASSERT_FALSE(table.ok()) << c.line;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(table.status().message(), HasSubstr("/etc/tomod/tokens:2: "));
    EXPECT_THAT(table.status().message(), HasSubstr(c.expected));
    EXPECT_THAT(table.status().message(), Not(HasSubstr(token.substr(0, kMinTokenBytes - 1))));
  }
}

TEST(TokenTableTest, RefusesATokenTwiceEvenForTheSameTenant) {
  std::mt19937_64 random(std::random_device{}());
  const std::string token = RandomToken(random);
  absl::StatusOr<TokenTable> table = TokenTable::Parse(
      absl::StrCat(token, " lab-a user\n", token, " lab-b user\n"), "tokens");
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.status().message(), HasSubstr("tokens:2: token: the same token"));
  EXPECT_THAT(table.status().message(), Not(HasSubstr(token)));
}

TEST(TokenTableTest, TenantNames) {
  EXPECT_TRUE(CheckTenantName("a").ok());
  EXPECT_TRUE(CheckTenantName("Lab-A_2.x").ok());
  EXPECT_TRUE(CheckTenantName(std::string(kMaxTenantBytes, 'z')).ok());
  EXPECT_FALSE(CheckTenantName("").ok());
  EXPECT_FALSE(CheckTenantName("a b").ok());
  EXPECT_FALSE(CheckTenantName("a,b").ok());
  EXPECT_FALSE(CheckTenantName("caf\xc3\xa9").ok());
}

TEST(PrincipalTest, UsersSeeTheirTenantAdminsEveryTenant) {
  const Principal user{"lab-a", Role::kUser};
  EXPECT_TRUE(user.SeesTenant("lab-a"));
  EXPECT_FALSE(user.SeesTenant("lab-b"));
  EXPECT_FALSE(user.SeesTenant(""));
  const Principal admin{"ops", Role::kAdmin};
  EXPECT_TRUE(admin.SeesTenant("lab-a"));
  EXPECT_TRUE(admin.SeesTenant(""));
}

}  // namespace
}  // namespace tomo::server

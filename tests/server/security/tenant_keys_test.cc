#include "server/security/tenant_keys.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace tomo::server {
namespace {

TEST(ScopedIdempotencyKeyTest, DefaultTenantKeepsItsKeysAndNamedTenantsAreApart) {
  EXPECT_EQ(ScopedIdempotencyKey("", "scan-42"), "scan-42");
  EXPECT_EQ(ScopedIdempotencyKey("lab-a", "scan-42"), "\x1flab-a\x1fscan-42");
  EXPECT_EQ(ScopedIdempotencyKey("lab-a", ""), "");
  EXPECT_EQ(ScopedIdempotencyKey("", ""), "");
}

// Pairs built to collide under a naive join: every scoped key differs.
TEST(ScopedIdempotencyKeyTest, OneToOne) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"", "a/b"},           {"a", "b"},          {"", "\x1f" "a\x1f" "b"},
      {"", "\x1f" "a"},      {"a", ""},           {"", "\x1f\x1f" "a"},
      {"ab", "c"},           {"a", "bc"},         {"", "\x1f" "ab\x1f" "c"},
      {"a", "\x1f" "b"},     {"", "ab"},          {"", "\x1f"}};
  std::set<std::string> seen;
  size_t with_key = 0;
  for (const auto& [tenant, key] : pairs) {
    if (key.empty()) continue;
    ++with_key;
    seen.insert(ScopedIdempotencyKey(tenant, key));
  }
  EXPECT_EQ(seen.size(), with_key);
}

}  // namespace
}  // namespace tomo::server

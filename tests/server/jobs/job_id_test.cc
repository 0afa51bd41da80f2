#include "server/jobs/job_id.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tomo::server {
namespace {

TEST(JobIdTest, UniqueSortedAndValid) {
  std::vector<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.push_back(NewJobId());
  std::set<std::string> unique(ids.begin(), ids.end());
  EXPECT_EQ(unique.size(), ids.size());
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_LT(ids[i - 1], ids[i]);
  for (const std::string& id : ids) EXPECT_TRUE(IsValidJobId(id)) << id;
  EXPECT_EQ(ids[0].size(), 35u);
}

TEST(JobIdTest, RandomPartDiffers) {
  const std::string a = NewJobId(), b = NewJobId();
  EXPECT_NE(a.substr(23), b.substr(23));
}

TEST(JobIdTest, InvalidIds) {
  EXPECT_FALSE(IsValidJobId(""));
  EXPECT_FALSE(IsValidJobId("../../etc/passwd"));
  EXPECT_FALSE(IsValidJobId("20240517-103045-123456-3f9a1c2b7d4G"));
  EXPECT_FALSE(IsValidJobId("20240517-103045-123456-3f9a1c2b7d4e0"));
  EXPECT_TRUE(IsValidJobId("20240517-103045-123456-3f9a1c2b7d4e"));
}

TEST(JobIdTest, QuoteEscapesAndShortens) {
  EXPECT_EQ(QuoteJobId("a\nb"), "\"a\\nb\"");
  EXPECT_EQ(QuoteJobId(std::string(200, 'x')).size(), 80u + 5u);
}

}  // namespace
}  // namespace tomo::server

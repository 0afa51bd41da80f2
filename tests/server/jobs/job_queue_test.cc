#include "server/jobs/job_queue.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tomo::server {
namespace {

TEST(JobQueueTest, HigherPriorityFirstFifoWithinAPriority) {
  JobQueue queue;
  queue.Push("a", 0);
  queue.Push("b", 10);
  queue.Push("c", 0);
  queue.Push("d", -5);
  queue.Push("e", 10);
  EXPECT_EQ(queue.Ids(), (std::vector<std::string>{"b", "e", "a", "c", "d"}));
  EXPECT_EQ(queue.size(), 5u);
  EXPECT_EQ(queue.PopFirst(), "b");
  EXPECT_EQ(queue.PopFirst(), "e");
  EXPECT_EQ(queue.PopFirst(), "a");
  EXPECT_EQ(queue.PopFirst(), "c");
  EXPECT_EQ(queue.PopFirst(), "d");
  EXPECT_EQ(queue.PopFirst(), std::nullopt);
  EXPECT_TRUE(queue.empty());
}

TEST(JobQueueTest, RemoveAndContains) {
  JobQueue queue;
  queue.Push("a", 1);
  queue.Push("b", 1);
  EXPECT_TRUE(queue.Contains("a"));
  EXPECT_TRUE(queue.Remove("a"));
  EXPECT_FALSE(queue.Remove("a"));
  EXPECT_FALSE(queue.Contains("a"));
  EXPECT_EQ(queue.PopFirst(), "b");
}

TEST(JobQueueTest, PushingTwiceKeepsThePlace) {
  JobQueue queue;
  queue.Push("a", 0);
  queue.Push("b", 0);
  queue.Push("a", 50);
  EXPECT_EQ(queue.Ids(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(queue.size(), 2u);
}

TEST(JobQueueTest, PopFirstSkipsJobsThatDoNotFit) {
  JobQueue queue;
  queue.Push("big", 10);
  queue.Push("small", 0);
  EXPECT_EQ(queue.PopFirst([](const std::string& id) { return id != "big"; }), "small");
  EXPECT_EQ(queue.PopFirst([](const std::string&) { return false; }), std::nullopt);
  EXPECT_EQ(queue.PopFirst(), "big");
}

}  // namespace
}  // namespace tomo::server

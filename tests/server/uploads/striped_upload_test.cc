// StripedUpload on a real JobManager and spool (scheduling paused, so that committed jobs
// stay QUEUED and their input stays as uploaded).
#include "server/uploads/striped_upload.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/devices/devices.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/spool.h"
#include "tests/runner/test_jobs.h"
#include "tests/core/random_seed.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::HasSubstr;
using testing::Crc32;
using testing::NewTempDir;
using testing::ReadFile;
using testing::SmallSpec;

constexpr uint64_t kUnit = uint64_t{64} << 10;

// Fresh random bytes of the spec's input size.
std::string RandomInput(const pb::JobSpec& spec, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::string bytes(spec.input().size_bytes(), '\0');
  for (char& byte : bytes) byte = static_cast<char>(random());
  return bytes;
}

// A stream's pause flag: set when Append says false, cleared by its resume callback.
struct Pause {
  std::atomic<bool> paused{false};
  std::atomic<int> resumed{0};
  std::function<void()> Resume() {
    return [this] {
      ++resumed;
      paused = false;
    };
  }
  bool WaitUntilResumed(absl::Duration timeout = absl::Seconds(10)) {
    const absl::Time until = absl::Now() + timeout;
    while (paused && absl::Now() < until) absl::SleepFor(absl::Milliseconds(1));
    return !paused;
  }
};

class StripedUploadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spool = Spool::Open(NewTempDir("striped"));
    ASSERT_TRUE(spool.ok()) << spool.status();
    spool_ = std::move(*spool);
    registry_ = core::AlgorithmRegistry::WithBuiltins();
    JobManagerOptions options;
    options.devices = {core::CpuDevice()};
    manager_ = std::make_unique<JobManager>(options, *spool_, registry_);
    manager_->SetSchedulingPaused(true);
    ASSERT_TRUE(manager_->Start().ok());
    // 2048 detectors x 401 views of float32: 50 units of 64 KiB and a short last one.
    spec_ = SmallSpec(/*detectors=*/2048, /*views=*/401, /*n=*/32);
    seed_ = tomo::testing::TestSeed();
    input_ = RandomInput(spec_, seed_);
  }
  void TearDown() override {
    if (manager_) manager_->Shutdown();
  }

  std::shared_ptr<StripedUpload> Begin(uint32_t count, uint64_t max_ahead_bytes = 0) {
    auto upload = manager_->BeginUpload(spec_, "client-a");
    EXPECT_TRUE(upload.ok()) << upload.status();
    if (!upload.ok()) return nullptr;
    UploadStripes stripes;
    stripes.count = count;
    stripes.unit_bytes = kUnit;
    return std::make_shared<StripedUpload>(std::move(*upload), "client-a", stripes,
                                           max_ahead_bytes);
  }
  std::string Unit(uint64_t u) const { return input_.substr(u * kUnit, kUnit); }
  uint64_t Units() const { return (input_.size() + kUnit - 1) / kUnit; }

  absl::StatusOr<pb::Job> Commit(StripedUpload& upload, uint32_t crc) {
    absl::Notification done;
    absl::StatusOr<pb::Job> result;
    upload.CommitAsync(input_.size(), crc, [&](absl::StatusOr<pb::Job> job) {
      result = std::move(job);
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  }
  bool JobExists(const std::string& id) const { return manager_->GetJob(id).ok(); }
  // Every unit in order, alternating between the two stripes (stripe 1 opened).
  void AppendEveryUnitOfTwoStripes(StripedUpload& upload) {
    for (uint64_t u = 0; u < Units(); ++u) {
      absl::StatusOr<bool> room = upload.Append(
          u % 2, u % 2 == 0 ? std::nullopt : std::optional<uint64_t>(u * kUnit), Unit(u), [] {});
      ASSERT_TRUE(room.ok()) << "unit " << u << ": " << room.status();
    }
  }

  std::unique_ptr<Spool> spool_;
  core::AlgorithmRegistry registry_;
  std::unique_ptr<JobManager> manager_;
  pb::JobSpec spec_;
  uint64_t seed_ = 0;
  std::string input_;
};

// A spool on tmpfs and an input over 64 MiB: the Upload writes through a mapping copied by
// several threads, fed in order by the stripes.
TEST(StripedUploadOnTmpfsTest, ALargeInputIsWrittenThroughAMappingAndIsTheInput) {
  const std::string dir = "/dev/shm/striped_upload_test_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  auto spool = Spool::Open(dir);
  ASSERT_TRUE(spool.ok()) << spool.status();
  core::AlgorithmRegistry registry = core::AlgorithmRegistry::WithBuiltins();
  JobManagerOptions options;
  options.devices = {core::CpuDevice()};
  JobManager manager(options, **spool, registry);
  manager.SetSchedulingPaused(true);
  ASSERT_TRUE(manager.Start().ok());
  // 4096 detectors x 4100 views of float32: 67174400 bytes, just over 64 MiB.
  pb::JobSpec spec = SmallSpec(/*detectors=*/4096, /*views=*/4100, /*n=*/32);
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  const std::string input = RandomInput(spec, seed);
  auto upload = manager.BeginUpload(spec, "client-a");
  ASSERT_TRUE(upload.ok()) << upload.status();
  UploadStripes stripes;
  stripes.count = 3;
  stripes.unit_bytes = uint64_t{1} << 20;
  auto striped = std::make_shared<StripedUpload>(std::move(*upload), "client-a", stripes);
  EXPECT_TRUE(striped->writes_through_mapping());
  const std::string id = striped->job_id();
  ASSERT_TRUE(striped->Open(1).ok());
  ASSERT_TRUE(striped->Open(2).ok());
  // Each stripe from its own thread, waiting for its resume when paused.
  std::vector<std::thread> senders;
  std::atomic<int> errors{0};
  for (uint32_t k = 0; k < 3; ++k) {
    senders.emplace_back([&, k] {
      Pause pause;
      for (uint64_t at = k * stripes.unit_bytes; at < input.size(); at += 3 * stripes.unit_bytes) {
        pause.paused = true;
        absl::StatusOr<bool> room =
            striped->Append(k, k == 0 ? std::nullopt : std::optional<uint64_t>(at),
                            input.substr(at, stripes.unit_bytes), pause.Resume());
        if (!room.ok()) {
          ++errors;
          return;
        }
        if (*room) pause.paused = false;
        if (!pause.WaitUntilResumed()) {
          ++errors;
          return;
        }
      }
    });
  }
  for (std::thread& sender : senders) sender.join();
  ASSERT_EQ(errors, 0);
  ASSERT_TRUE(striped->EndStripe(1).ok());
  ASSERT_TRUE(striped->EndStripe(2).ok());
  absl::Notification done;
  absl::StatusOr<pb::Job> job;
  striped->CommitAsync(input.size(), Crc32(input), [&](absl::StatusOr<pb::Job> committed) {
    job = std::move(committed);
    done.Notify();
  });
  done.WaitForNotification();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), pb::JOB_STATE_QUEUED);
  EXPECT_TRUE(ReadFile((*spool)->InputPath(id)) == input) << "the spooled input differs";
  striped.reset();
  manager.Shutdown();
  std::filesystem::remove_all(dir);
}

TEST(UploadStripingTest, ValidatesCountAndUnit) {
  pb::UploadStriping striping;
  auto one = ValidateUploadStriping(striping);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->count, 1u);
  EXPECT_EQ(one->unit_bytes, kDefaultUploadUnitBytes);
  striping.set_count(17);
  auto many = ValidateUploadStriping(striping);
  EXPECT_EQ(many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(many.status().message(), HasSubstr("striping.count: 17 is out of range [0, 16]"));
  striping.set_count(4);
  striping.set_unit_bytes(1000);
  auto small = ValidateUploadStriping(striping);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(small.status().message(), HasSubstr("striping.unit_bytes: 1000"));
  striping.set_unit_bytes(kMaxUploadUnitBytes);
  auto largest = ValidateUploadStriping(striping);
  ASSERT_TRUE(largest.ok());
  EXPECT_EQ(largest->count, 4u);
  EXPECT_EQ(largest->unit_bytes, kMaxUploadUnitBytes);
}

TEST_F(StripedUploadTest, UnitsInAnyInterleavingGiveTheInputInOrder) {
  constexpr uint32_t kStripes = 3;
  std::shared_ptr<StripedUpload> upload = Begin(kStripes);
  ASSERT_NE(upload, nullptr);
  const std::string id = upload->job_id();
  ASSERT_TRUE(upload->Open(1).ok());
  ASSERT_TRUE(upload->Open(2).ok());
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  std::mt19937_64 random(seed_);
  std::vector<uint64_t> next_unit = {0, 1, 2};
  std::vector<Pause> pauses(kStripes);
  for (;;) {
    std::vector<uint32_t> ready;
    for (uint32_t k = 0; k < kStripes; ++k) {
      if (next_unit[k] < Units() && !pauses[k].paused) ready.push_back(k);
    }
    if (ready.empty()) {
      bool left = false;
      for (uint32_t k = 0; k < kStripes; ++k) left = left || next_unit[k] < Units();
      if (!left) break;
      absl::SleepFor(absl::Milliseconds(1));  // a paused stream waits for the writer
      continue;
    }
    const uint32_t k = ready[random() % ready.size()];
    const uint64_t u = next_unit[k];
    next_unit[k] += kStripes;
    pauses[k].paused = true;
    absl::StatusOr<bool> room =
        upload->Append(k, k == 0 ? std::nullopt : std::optional<uint64_t>(u * kUnit), Unit(u),
                       pauses[k].Resume());
    ASSERT_TRUE(room.ok()) << room.status();
    if (*room) pauses[k].paused = false;
  }
  for (uint32_t k = 0; k < kStripes; ++k) ASSERT_TRUE(pauses[k].WaitUntilResumed());
  EXPECT_TRUE(upload->EndStripe(1).ok());
  EXPECT_TRUE(upload->EndStripe(2).ok());
  EXPECT_EQ(upload->StripeBytesReceived(0) + upload->StripeBytesReceived(1) +
                upload->StripeBytesReceived(2),
            input_.size());
  absl::StatusOr<pb::Job> job = Commit(*upload, Crc32(input_));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->id(), id);
  EXPECT_EQ(job->state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(ReadFile(spool_->InputPath(id)), input_);
}

TEST_F(StripedUploadTest, AStreamTooFarAheadPausesUntilTheMissingUnitArrives) {
  // Two stripes: at least 4 units each may wait (512 KiB), whatever is asked.
  std::shared_ptr<StripedUpload> upload = Begin(2, /*max_ahead_bytes=*/1);
  ASSERT_NE(upload, nullptr);
  ASSERT_TRUE(upload->Open(1).ok());
  Pause ahead;
  uint64_t u = 1;
  for (; u < Units(); u += 2) {
    ahead.paused = true;
    absl::StatusOr<bool> room = upload->Append(1, u * kUnit, Unit(u), ahead.Resume());
    ASSERT_TRUE(room.ok()) << room.status();
    if (!*room) break;
    ahead.paused = false;
  }
  // Units 1, 3, ..., 17 are 9 x 64 KiB > 512 KiB: the ninth pauses stripe 1.
  ASSERT_EQ(u, 17u);
  ASSERT_TRUE(ahead.paused);
  EXPECT_EQ(ahead.resumed, 0);
  // Stripe 0's first unit lets units 0 and 1 go on: 7 units wait, under the bound.
  Pause owner;
  absl::StatusOr<bool> room = upload->Append(0, std::nullopt, Unit(0), owner.Resume());
  ASSERT_TRUE(room.ok()) << room.status();
  EXPECT_TRUE(*room);
  EXPECT_EQ(ahead.resumed, 1);
  EXPECT_FALSE(ahead.paused);
}

TEST_F(StripedUploadTest, TheOwnerOfTheMissingUnitIsNeverPausedForBeingAhead) {
  // Stripe 1 runs 9 units ahead and is paused; stripe 0 then sends units 0, 2, 4, ...: each
  // is the missing one, so stripe 0 always may read on.
  std::shared_ptr<StripedUpload> upload = Begin(2, /*max_ahead_bytes=*/1);
  ASSERT_NE(upload, nullptr);
  ASSERT_TRUE(upload->Open(1).ok());
  Pause ahead;
  for (uint64_t u = 1; u < Units(); u += 2) {
    ahead.paused = true;
    absl::StatusOr<bool> room = upload->Append(1, u * kUnit, Unit(u), ahead.Resume());
    ASSERT_TRUE(room.ok());
    if (!*room) break;
    ahead.paused = false;
  }
  ASSERT_TRUE(ahead.paused);
  // Units 0, 2, ..., 18 are each the missing one when they come (stripe 1 sent up to 17).
  for (uint64_t u = 0; u <= 18; u += 2) {
    absl::StatusOr<bool> room = upload->Append(0, std::nullopt, Unit(u), [] {});
    ASSERT_TRUE(room.ok()) << room.status();
    EXPECT_TRUE(*room) << "unit " << u;
  }
  EXPECT_FALSE(ahead.paused);
  // Now unit 19 (stripe 1's) is missing: stripe 0 running on is ahead and pauses, past the
  // bound of 8 units.
  Pause owner;
  uint64_t u = 20;
  for (; u < Units(); u += 2) {
    owner.paused = true;
    absl::StatusOr<bool> room = upload->Append(0, std::nullopt, Unit(u), owner.Resume());
    ASSERT_TRUE(room.ok()) << room.status();
    if (!*room) break;
    owner.paused = false;
  }
  EXPECT_EQ(u, 36u);  // units 20, 22, ..., 36: 9 units wait
  ASSERT_TRUE(owner.paused);
  ASSERT_TRUE(upload->Append(1, 19 * kUnit, Unit(19), [] {}).ok());
  EXPECT_FALSE(owner.paused);
}

TEST_F(StripedUploadTest, AUnitOutOfPlaceAbortsTheUploadAndWakesPausedStreams) {
  std::shared_ptr<StripedUpload> upload = Begin(2, /*max_ahead_bytes=*/1);
  ASSERT_NE(upload, nullptr);
  const std::string id = upload->job_id();
  ASSERT_TRUE(upload->Open(1).ok());
  Pause ahead;
  for (uint64_t u = 1;; u += 2) {
    ahead.paused = true;
    absl::StatusOr<bool> room = upload->Append(1, u * kUnit, Unit(u), ahead.Resume());
    ASSERT_TRUE(room.ok());
    if (!*room) break;
    ahead.paused = false;
  }
  Pause owner;
  // Stripe 0's next unit is at 0, not at 2 units.
  absl::StatusOr<bool> wrong = upload->Append(0, 2 * kUnit, Unit(2), owner.Resume());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(),
              HasSubstr("data.offset: 131072; stripe 0 of 2 of job " + id +
                        " expects its next unit at 0"));
  EXPECT_EQ(ahead.resumed, 1);
  EXPECT_FALSE(JobExists(id));
  // Every later call gets the same error.
  absl::StatusOr<bool> later = upload->Append(1, 19 * kUnit, Unit(19), ahead.Resume());
  EXPECT_EQ(later.status(), wrong.status());
  EXPECT_EQ(upload->EndStripe(1), wrong.status());
}

TEST_F(StripedUploadTest, AUnitOfTheWrongSizeIsInvalidArgument) {
  std::shared_ptr<StripedUpload> upload = Begin(2);
  ASSERT_NE(upload, nullptr);
  const std::string id = upload->job_id();
  absl::StatusOr<bool> short_unit =
      upload->Append(0, std::nullopt, Unit(0).substr(0, 1000), [] {});
  EXPECT_EQ(short_unit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_unit.status().message(),
              HasSubstr("data: 1000 bytes at offset 0 of job " + id +
                        "'s input; the unit there is 65536 bytes"));
  EXPECT_FALSE(JobExists(id));
}

TEST_F(StripedUploadTest, TheLastUnitIsShortAndAStripeCannotSendMore) {
  std::shared_ptr<StripedUpload> upload = Begin(2);
  ASSERT_NE(upload, nullptr);
  ASSERT_TRUE(upload->Open(1).ok());
  // 51 units: the last (50, stripe 0) holds 8 KiB.
  ASSERT_EQ(Units(), 51u);
  AppendEveryUnitOfTwoStripes(*upload);
  if (HasFatalFailure()) return;
  EXPECT_EQ(Unit(50).size(), 8u << 10);
  absl::StatusOr<bool> more = upload->Append(1, 51 * kUnit, Unit(0), [] {});
  EXPECT_EQ(more.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(more.status().message(), HasSubstr("stripe 1 of 2"));
  EXPECT_THAT(more.status().message(), HasSubstr("has no unit left at offset 3342336"));
}

TEST_F(StripedUploadTest, AStripeThatEndsEarlyAbortsTheUpload) {
  std::shared_ptr<StripedUpload> upload = Begin(2);
  ASSERT_NE(upload, nullptr);
  const std::string id = upload->job_id();
  ASSERT_TRUE(upload->Open(1).ok());
  ASSERT_TRUE(upload->Append(1, kUnit, Unit(1), [] {}).ok());
  absl::Status ended = upload->EndStripe(1);
  EXPECT_EQ(ended.code(), absl::StatusCode::kInvalidArgument);
  // Stripe 1 holds units 1, 3, ..., 49: 25 x 64 KiB.
  EXPECT_THAT(ended.message(), HasSubstr("stripe 1 of 2 of job " + id +
                                         "'s upload ended after 65536 of its 1638400 bytes, "
                                         "before its unit at offset 196608"));
  EXPECT_FALSE(JobExists(id));
}

TEST_F(StripedUploadTest, UploadEndBeforeEveryStripeEndedIsInvalidArgument) {
  std::shared_ptr<StripedUpload> upload = Begin(2);
  ASSERT_NE(upload, nullptr);
  const std::string id = upload->job_id();
  ASSERT_TRUE(upload->Open(1).ok());
  AppendEveryUnitOfTwoStripes(*upload);
  if (HasFatalFailure()) return;
  absl::StatusOr<pb::Job> early = Commit(*upload, Crc32(input_));
  EXPECT_EQ(early.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(early.status().message(),
              HasSubstr("upload_end: stripe 1 of 2 of job " + id + " has not ended"));
  EXPECT_FALSE(JobExists(id));
}

TEST_F(StripedUploadTest, AWrongChecksumRemovesTheJob) {
  std::shared_ptr<StripedUpload> upload = Begin(2);
  ASSERT_NE(upload, nullptr);
  const std::string id = upload->job_id();
  ASSERT_TRUE(upload->Open(1).ok());
  AppendEveryUnitOfTwoStripes(*upload);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(upload->EndStripe(1).ok());
  absl::StatusOr<pb::Job> job = Commit(*upload, Crc32(input_) ^ 1);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(), HasSubstr("upload_end.crc32"));
  EXPECT_FALSE(JobExists(id));
}

TEST_F(StripedUploadTest, StripesOpenOnceAndInRange) {
  std::shared_ptr<StripedUpload> upload = Begin(3);
  ASSERT_NE(upload, nullptr);
  EXPECT_THAT(upload->Open(0).message(), HasSubstr("open.stripe_index: 0 is out of range [1, 3)"));
  EXPECT_THAT(upload->Open(3).message(), HasSubstr("open.stripe_index: 3 is out of range [1, 3)"));
  EXPECT_TRUE(upload->Open(2).ok());
  absl::Status twice = upload->Open(2);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.message(), HasSubstr("sent by another call already"));
  // Refused opens do not end the upload.
  EXPECT_TRUE(JobExists(upload->job_id()));
}

TEST_F(StripedUploadTest, DroppingAnUncommittedUploadRemovesTheJob) {
  std::shared_ptr<StripedUpload> upload = Begin(2);
  ASSERT_NE(upload, nullptr);
  const std::string id = upload->job_id();
  ASSERT_TRUE(upload->Append(0, std::nullopt, Unit(0), [] {}).ok());
  upload.reset();
  EXPECT_FALSE(JobExists(id));
}

TEST_F(StripedUploadTest, TheRegistryFindsUploadsOfTheirOwnClientOnly) {
  StripedUploadRegistry registry;
  std::shared_ptr<StripedUpload> upload = Begin(2);
  ASSERT_NE(upload, nullptr);
  const std::string id = upload->job_id();
  registry.Add(upload);
  {
    auto found = registry.Find(id, "client-a");
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->get(), upload.get());
  }
  auto other = registry.Find(id, "client-b");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(other.status().message(), HasSubstr("begun by client client-a, not client-b"));
  auto unknown = registry.Find("j-unknown", "client-a");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("has no striped upload in progress"));
  // A registry holds no upload alive.
  upload.reset();
  EXPECT_EQ(registry.Find(id, "client-a").status().code(), absl::StatusCode::kNotFound);
  registry.Remove(id);
}

}  // namespace
}  // namespace tomo::server

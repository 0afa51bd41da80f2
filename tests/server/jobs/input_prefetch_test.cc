#include "server/jobs/input_prefetch.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/devices/devices.h"
#include "core/devices/host_pinning.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/job_execution.h"
#include "server/jobs/job_queue.h"
#include "runner/job_spec.h"
#include "server/telemetry/tomod_metrics.h"
#include "tests/runner/test_jobs.h"
#include "tests/core/random_seed.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::NewTempDir;
using testing::SmallSpec;
using testing::WriteFile;

// Queued jobs with their spooled inputs: fresh random line integrals per job.
class PrefetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTempDir("prefetch");
    seed_ = tomo::testing::TestSeed();
    random_.seed(seed_);
  }

  // Queues id with an input of detectors x views random floats; returns the floats.
  std::vector<float> Queue(const std::string& id, int32_t priority, uint32_t detectors = 16,
                           uint32_t views = 8) {
    absl::StatusOr<ValidatedJob> job = ValidateJobSpec(SmallSpec(detectors, views, 16), {});
    EXPECT_TRUE(job.ok()) << job.status();
    std::uniform_real_distribution<float> value(-2.0f, 5.0f);
    std::vector<float> values(size_t{detectors} * views);
    for (float& v : values) v = value(random_);
    std::string bytes(values.size() * sizeof(float), '\0');
    std::memcpy(bytes.data(), values.data(), bytes.size());
    const std::string path = dir_ + "/" + id + ".bin";
    WriteFile(path, bytes);
    jobs_[id] = PrefetchJob{std::make_shared<const ValidatedJob>(std::move(*job)), path};
    queue_.Push(id, priority);
    return values;
  }

  InputPrefetcher::JobLookup Lookup() {
    return [this](const std::string& id) -> std::optional<PrefetchJob> {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) return std::nullopt;
      return it->second;
    };
  }

  double Outcomes(const char* outcome) const {
    return metrics_.input_prefetch().Value({outcome});
  }

  static std::vector<float> Values(const JobInput& input) {
    return std::vector<float>(input.projections.data(),
                              input.projections.data() + input.projections.size());
  }

  std::string dir_;
  uint64_t seed_ = 0;
  std::mt19937_64 random_;
  std::map<std::string, PrefetchJob> jobs_;
  JobQueue queue_;
  TomodMetrics metrics_;
};

TEST_F(PrefetchTest, EstimateIsTheFloatProjections) {
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(SmallSpec(24, 10, 16), {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(EstimatedInputBytes(*job), 24u * 10u * 4u);
}

TEST_F(PrefetchTest, ReadsTheJobTheQueueHandsOutNextAndGivesItToTake) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  const std::vector<float> low = Queue("low", 0);
  const std::vector<float> high = Queue("high", 5, 20, 6);
  InputPrefetcher prefetcher(/*slots=*/2, /*max_bytes=*/1 << 20, &metrics_);

  EXPECT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), "high");
  EXPECT_EQ(queue_.Ids(), (std::vector<std::string>{"high", "low"}));  // peeked, not popped
  // A busy slot reserves nothing; another slot skips the job held already.
  EXPECT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), std::nullopt);
  EXPECT_EQ(prefetcher.PrefetchNext(1, queue_, Lookup()), "low");
  EXPECT_THAT(prefetcher.held_ids(), ElementsAre("high", "low"));
  EXPECT_EQ(prefetcher.held_bytes(), (20u * 6u + 16u * 8u) * 4u);

  // Take waits for a read still in progress: both are hits, the values those spooled.
  std::optional<JobInput> high_input = prefetcher.Take(*queue_.PopFirst());
  ASSERT_TRUE(high_input.has_value());
  EXPECT_EQ(high_input->projections.dims(), (core::Dims3{6, 1, 20}));
  EXPECT_EQ(Values(*high_input), high);
  std::optional<JobInput> low_input = prefetcher.Take(*queue_.PopFirst());
  ASSERT_TRUE(low_input.has_value());
  EXPECT_EQ(Values(*low_input), low);
  // The same as the worker's own read.
  absl::StatusOr<JobInput> direct = ReadJobInput(*jobs_["low"].job, jobs_["low"].input_path);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(Values(*direct), Values(*low_input));

  EXPECT_EQ(Outcomes("hit"), 2);
  EXPECT_EQ(Outcomes("miss"), 0);
  EXPECT_EQ(Outcomes("dropped"), 0);
  EXPECT_EQ(prefetcher.held_bytes(), 0u);
  EXPECT_TRUE(prefetcher.held_ids().empty());
  // Nothing left to read ahead; a job nobody read ahead is a miss.
  EXPECT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), std::nullopt);
  EXPECT_EQ(prefetcher.Take("other"), std::nullopt);
  EXPECT_EQ(Outcomes("miss"), 1);
}

TEST_F(PrefetchTest, CancelledJobsInputIsDropped) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  Queue("a", 0);
  Queue("b", 0);
  InputPrefetcher prefetcher(2, 1 << 20, &metrics_);
  ASSERT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), "a");
  ASSERT_EQ(prefetcher.PrefetchNext(1, queue_, Lookup()), "b");
  // "a" is cancelled while (or after) it is read; "b" once it has been read.
  queue_.Remove("a");
  prefetcher.Drop("a");
  prefetcher.WaitForReads();
  EXPECT_THAT(prefetcher.held_ids(), ElementsAre("b"));
  queue_.Remove("b");
  prefetcher.Drop("b");
  EXPECT_EQ(Outcomes("dropped"), 2);
  prefetcher.WaitForReads();
  EXPECT_EQ(prefetcher.held_bytes(), 0u);
  EXPECT_TRUE(prefetcher.held_ids().empty());
  EXPECT_EQ(prefetcher.Take("a"), std::nullopt);
  EXPECT_EQ(Outcomes("miss"), 1);
  EXPECT_EQ(Outcomes("hit"), 0);
  // Dropping what is not held is harmless and not counted.
  prefetcher.Drop("a");
  EXPECT_EQ(Outcomes("dropped"), 2);

  // Both slots are free again.
  Queue("c", 0);
  EXPECT_EQ(prefetcher.PrefetchNext(1, queue_, Lookup()), "c");
}

TEST_F(PrefetchTest, ByteCapKeepsOutJobsThatDoNotFit) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  Queue("a", 0, 16, 8);  // 512 bytes
  Queue("b", 0, 16, 8);
  {
    InputPrefetcher prefetcher(2, 511, &metrics_);
    EXPECT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), std::nullopt);
    EXPECT_EQ(prefetcher.held_bytes(), 0u);
  }
  InputPrefetcher prefetcher(2, 1000, &metrics_);
  ASSERT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), "a");
  // 512 + 512 > 1000: the second slot stays free.
  EXPECT_EQ(prefetcher.PrefetchNext(1, queue_, Lookup()), std::nullopt);
  EXPECT_LE(prefetcher.held_bytes(), 1000u);
  ASSERT_EQ(queue_.PopFirst(), "a");
  ASSERT_TRUE(prefetcher.Take("a").has_value());
  // Taken, its bytes are the worker's: "b" fits now.
  EXPECT_EQ(prefetcher.PrefetchNext(1, queue_, Lookup()), "b");
  EXPECT_EQ(prefetcher.held_bytes(), 512u);
}

TEST_F(PrefetchTest, FailedReadIsDroppedAndTheWorkerReadsTheErrorItself) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  std::vector<float> values = Queue("nan", 0);
  // A NaN at a random place: the finite check fails the read ahead.
  const size_t at = std::uniform_int_distribution<size_t>(0, values.size() - 1)(random_);
  values[at] = std::nanf("");
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  WriteFile(jobs_["nan"].input_path, bytes);
  Queue("missing", 0);
  std::filesystem::remove(jobs_["missing"].input_path);

  InputPrefetcher prefetcher(2, 1 << 20, &metrics_);
  ASSERT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), "nan");
  ASSERT_EQ(queue_.PopFirst(), "nan");
  EXPECT_EQ(prefetcher.Take("nan"), std::nullopt);
  ASSERT_EQ(prefetcher.PrefetchNext(1, queue_, Lookup()), "missing");
  ASSERT_EQ(queue_.PopFirst(), "missing");
  EXPECT_EQ(prefetcher.Take("missing"), std::nullopt);
  EXPECT_EQ(Outcomes("dropped"), 2);
  EXPECT_EQ(Outcomes("miss"), 2);
  EXPECT_EQ(Outcomes("hit"), 0);
  EXPECT_EQ(prefetcher.held_bytes(), 0u);

  // The worker's own read gives the error.
  absl::StatusOr<JobInput> nan = ReadJobInput(*jobs_["nan"].job, jobs_["nan"].input_path);
  EXPECT_EQ(nan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(nan.status().message(), HasSubstr(absl::StrCat("at index ", at)));
  absl::StatusOr<JobInput> missing =
      ReadJobInput(*jobs_["missing"].job, jobs_["missing"].input_path);
  EXPECT_FALSE(missing.ok());
}

TEST_F(PrefetchTest, StopDropsWhatIsHeldAndReadsNothingMore) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  Queue("a", 0);
  Queue("b", 0);
  InputPrefetcher prefetcher(2, 1 << 20, &metrics_);
  ASSERT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), "a");
  prefetcher.WaitForReads();
  ASSERT_EQ(prefetcher.PrefetchNext(1, queue_, Lookup()), "b");  // possibly still reading
  prefetcher.Stop();
  EXPECT_EQ(Outcomes("dropped"), 2);
  EXPECT_EQ(prefetcher.held_bytes(), 0u);
  EXPECT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), std::nullopt);
  prefetcher.Stop();  // idempotent
}

TEST_F(PrefetchTest, ZeroBytesDisablesPrefetching) {
  Queue("a", 0);
  InputPrefetcher prefetcher(1, 0, &metrics_);
  EXPECT_FALSE(prefetcher.enabled());
  EXPECT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), std::nullopt);
  EXPECT_EQ(prefetcher.Take("a"), std::nullopt);
  EXPECT_EQ(Outcomes("hit") + Outcomes("miss") + Outcomes("dropped"), 0);
}

// A pinner that pins nothing but says it did, and counts what it was asked to lock and
// which regions are still alive. The prefetcher's reader threads call it concurrently (an
// unguarded count once lost one of two calls under load).
struct FakePinner {
  struct Region final : core::PinnedHostRegion {
    Region(const void* data, size_t bytes, FakePinner* owner)
        : core::PinnedHostRegion(data, bytes, /*pinned=*/true, ""), owner(owner) {
      ++owner->alive;
    }
    ~Region() override { --owner->alive; }
    FakePinner* owner;
  };
  HostPinner pinner() {
    return [this](const void* data,
                  size_t bytes) -> absl::StatusOr<std::unique_ptr<core::PinnedHostRegion>> {
      ++calls;
      if (!fail.ok()) return fail;
      return std::unique_ptr<core::PinnedHostRegion>(std::make_unique<Region>(data, bytes, this));
    };
  }
  std::atomic<int> calls{0};
  absl::Status fail;  // set before the prefetcher starts
  std::atomic<int> alive{0};
};

TEST_F(PrefetchTest, PinsTheProjectionsReadAheadWhenAskedAndKeepsTheirBytes) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  const std::vector<float> a = Queue("a", 0, 16, 8);
  const std::vector<float> b = Queue("b", 0, 20, 6);
  FakePinner fake;
  InputPrefetchOptions options;
  options.pin_inputs = true;
  options.min_pin_bytes = 0;  // the test's inputs are small
  options.pinner = fake.pinner();
  InputPrefetcher prefetcher(2, 1 << 20, &metrics_, options);
  ASSERT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), "a");
  ASSERT_EQ(prefetcher.PrefetchNext(1, queue_, Lookup()), "b");
  prefetcher.WaitForReads();  // pinning is part of the read
  EXPECT_EQ(fake.calls.load(), 2);
  EXPECT_EQ(fake.alive.load(), 2);

  ASSERT_EQ(queue_.PopFirst(), "a");
  std::optional<JobInput> input = prefetcher.Take("a");
  ASSERT_TRUE(input.has_value());
  ASSERT_NE(input->pinned_projections, nullptr);
  EXPECT_TRUE(input->pinned_projections->pinned());
  // The region is the projections' own memory, which the moves into Take kept in place.
  EXPECT_EQ(input->pinned_projections->data(), input->projections.data());
  EXPECT_EQ(input->pinned_projections->size_bytes(), input->projections.size_bytes());
  EXPECT_EQ(Values(*input), a);
  absl::StatusOr<JobInput> direct = ReadJobInput(*jobs_["a"].job, jobs_["a"].input_path);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(direct->pinned_projections, nullptr);  // the worker's own read pins nothing
  EXPECT_EQ(Values(*direct), Values(*input));
  EXPECT_EQ(metrics_.input_pinned_bytes().Value({}), (16.0 * 8 + 20.0 * 6) * 4);
  EXPECT_EQ(metrics_.input_pin_failures().Value({}), 0);
  // Freeing the input unlocks it; dropping the other one too.
  input.reset();
  EXPECT_EQ(fake.alive.load(), 1);
  queue_.Remove("b");
  prefetcher.Drop("b");
  EXPECT_EQ(fake.alive.load(), 0);
  EXPECT_EQ(Outcomes("hit"), 1);
  EXPECT_EQ(Outcomes("dropped"), 1);
}

TEST_F(PrefetchTest, FailedPinIsNotAnErrorTheInputIsUsedUnpinned) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  const std::vector<float> a = Queue("a", 0);
  FakePinner fake;
  fake.fail = absl::ResourceExhaustedError("cudaHostRegister: out of memory");
  InputPrefetchOptions options;
  options.pin_inputs = true;
  options.min_pin_bytes = 0;  // the test's inputs are small
  options.pinner = fake.pinner();
  InputPrefetcher prefetcher(1, 1 << 20, &metrics_, options);
  ASSERT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), "a");
  ASSERT_EQ(queue_.PopFirst(), "a");
  std::optional<JobInput> input = prefetcher.Take("a");
  ASSERT_TRUE(input.has_value());
  EXPECT_EQ(fake.calls.load(), 1);
  EXPECT_EQ(input->pinned_projections, nullptr);
  EXPECT_EQ(Values(*input), a);
  EXPECT_EQ(Outcomes("hit"), 1);
  EXPECT_EQ(Outcomes("dropped"), 0);
  EXPECT_EQ(metrics_.input_pin_failures().Value({}), 1);
  EXPECT_EQ(metrics_.input_pinned_bytes().Value({}), 0);
}

TEST_F(PrefetchTest, PinsNothingUnlessAsked) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  Queue("a", 0);
  FakePinner fake;
  InputPrefetchOptions options;
  options.pinner = fake.pinner();  // pin_inputs false
  InputPrefetcher prefetcher(1, 1 << 20, &metrics_, options);
  ASSERT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), "a");
  ASSERT_EQ(queue_.PopFirst(), "a");
  std::optional<JobInput> input = prefetcher.Take("a");
  ASSERT_TRUE(input.has_value());
  EXPECT_EQ(fake.calls.load(), 0);
  EXPECT_EQ(input->pinned_projections, nullptr);
}

TEST_F(PrefetchTest, InputsBelowTheThresholdStayPageable) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  const std::vector<float> a = Queue("a", 0, 16, 8);
  FakePinner fake;
  InputPrefetchOptions options;
  options.pin_inputs = true;
  options.min_pin_bytes = 16 * 8 * 4 + 1;
  options.pinner = fake.pinner();
  InputPrefetcher prefetcher(1, 1 << 20, &metrics_, options);
  ASSERT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), "a");
  ASSERT_EQ(queue_.PopFirst(), "a");
  std::optional<JobInput> input = prefetcher.Take("a");
  ASSERT_TRUE(input.has_value());
  EXPECT_EQ(fake.calls.load(), 0);
  EXPECT_EQ(input->pinned_projections, nullptr);
  EXPECT_EQ(Values(*input), a);
}

// The real pinner (core::PinHostMemory): without a CUDA device (CI, a CPU-only build) it
// pins nothing and says why; with one, the projections are page-locked. The bytes are the
// spool's either way.
TEST_F(PrefetchTest, RealPinnerLocksOnlyWithACudaDevice) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  const std::vector<float> a = Queue("a", 0, 64, 32);
  InputPrefetchOptions options;
  options.pin_inputs = true;
  options.min_pin_bytes = 0;  // the test's inputs are small
  InputPrefetcher prefetcher(1, 1 << 20, &metrics_, options);
  ASSERT_EQ(prefetcher.PrefetchNext(0, queue_, Lookup()), "a");
  ASSERT_EQ(queue_.PopFirst(), "a");
  std::optional<JobInput> input = prefetcher.Take("a");
  ASSERT_TRUE(input.has_value());
  EXPECT_EQ(Values(*input), a);
  EXPECT_EQ(metrics_.input_pin_failures().Value({}), 0);
  ASSERT_NE(input->pinned_projections, nullptr);
  const bool device = !core::ListCudaDevices().empty();
  EXPECT_EQ(input->pinned_projections->pinned(), device)
      << input->pinned_projections->why_not();
  if (device) {
    EXPECT_EQ(metrics_.input_pinned_bytes().Value({}), 64.0 * 32 * 4);
  } else {
    EXPECT_FALSE(input->pinned_projections->why_not().empty());
    EXPECT_EQ(metrics_.input_pinned_bytes().Value({}), 0);
  }
}

}  // namespace
}  // namespace tomo::server

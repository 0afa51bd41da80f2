// SIGTERM draining, tested on the real tomod: a job caught RUNNING when tomod is told to
// stop is handed back as QUEUED (not CANCELLED, the run not counted as an attempt), tomod
// exits 0 within its --drain_timeout, and after the restart the job runs to the end with
// exactly the bytes `tomo local` makes from the same input.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/tomo_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/end_to_end/daemon_fixture.h"

namespace tomo::testing {
namespace {

namespace v1 = ::tomoserve::v1;
using ::testing::AllOf;
using ::testing::HasSubstr;

class DrainTest : public DaemonTest {};

TEST_F(DrainTest, SigtermDuringARunRequeuesTheJobAndItSucceedsAfterTheRestart) {
  // Large enough on the CPU to be caught running (about a second), small enough to run
  // twice.
  const std::string phantom = MakePhantom("drain", 512, 720);
  ASSERT_FALSE(HasFailure());
  const std::string reference_dir = dir() + "/reference";
  ProcessResult local =
      TomoRaw({"local", "--spec", phantom + "/job.json", "--data", phantom + "/sinogram.raw",
               "--out", reference_dir, "--device", "cpu"});
  ASSERT_EQ(local.exit_code, 0) << local.Describe();
  const std::string reference = FileBytes(reference_dir + "/volume.raw");
  ASSERT_FALSE(reference.empty());

  ASSERT_EQ(StopDaemon(), 0);
  // A drain of 0 s hands the run back at once, so the test need not guess a run's length.
  StartDaemon({"--devices=cpu", "--drain_timeout=0s"});
  ProcessResult submitted =
      Tomo({"submit", "--spec", phantom + "/job.json", "--data", phantom + "/sinogram.raw"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.Describe();
  ASSERT_FALSE(submitted.OutLines().empty());
  const std::string id = submitted.OutLines().back();

  {
    // Scoped: an idle channel of this process would hold up tomod's gRPC shutdown.
    client::TomoClient client(server());
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    absl::StatusOr<v1::Job> job = client.GetJob(id);
    while (job.ok() && job->state() == v1::JOB_STATE_QUEUED && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
      job = client.GetJob(id);
    }
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_EQ(job->state(), v1::JOB_STATE_RUNNING)
        << "the job was not caught running; it is " << client::JobStateName(job->state());
  }

  const absl::Time stop = absl::Now();
  EXPECT_EQ(StopDaemon(absl::Seconds(30)), 0);
  EXPECT_LT(absl::Now() - stop, absl::Seconds(20));
  EXPECT_THAT(FileBytes(tomod_log()), AllOf(HasSubstr("received SIGTERM"),
                                            HasSubstr("queued again: tomod is draining (SIGTERM)"),
                                            HasSubstr("does not count as an attempt")));

  StartDaemon({"--devices=cpu"});
  client::TomoClient after(server());
  absl::StatusOr<v1::Job> restored = after.GetJob(id);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_NE(restored->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_NE(restored->state(), v1::JOB_STATE_FAILED);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  absl::StatusOr<v1::Job> done = after.GetJob(id);
  while (done.ok() && !client::IsFinal(done->state()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    done = after.GetJob(id);
  }
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->error();
  EXPECT_EQ(done->attempts(), 1u);
  const std::string out = dir() + "/fetched";
  absl::StatusOr<v1::ResultFile> file = after.Fetch(id, "", out, /*resume=*/false);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(FileBytes(out) == reference) << "the result differs from tomo local's";
}

}  // namespace
}  // namespace tomo::testing

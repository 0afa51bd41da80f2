// One job on several devices (--multi_device_jobs), on the real tomod over loopback with
// several CPU workers (--devices cpu,cpu:1,...) standing in for GPUs: with the policy off
// two jobs run side by side, one device each; with it on a large FDK job takes every idle
// device (GetJob and `tomo status` list them) and reconstructs what one device does, a
// small one keeps one device and leaves the other to a second job; the metrics count runs
// by their number of devices; a cancelled, drained or crashed multi-device job gives all
// its devices back; a bad flag value is refused naming the flag, the value and the choices.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/tomo_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/end_to_end/daemon_fixture.h"
#include "tests/server/http_get.h"

namespace tomo::testing {
namespace {

namespace v1 = ::tomoserve::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

class MultiDeviceTest : public DaemonTest {
 protected:
  // Restarts tomod with these flags and the metrics on a free port (after stopping it
  // with SIGTERM unless it was killed).
  void Restart(std::vector<std::string> flags, bool killed = false) {
    if (!killed) ASSERT_EQ(StopDaemon(), 0);
    metrics_port_ = FreeLoopbackPort();
    flags.push_back(absl::StrCat("--metrics_port=", metrics_port_));
    // The CPU workers never follow uploads under the default; said here so that every job
    // below runs from the spool.
    flags.push_back("--reconstruct_while_uploading=never");
    StartDaemon(flags);
  }

  std::map<std::string, double> Scrape() {
    absl::StatusOr<HttpResponse> response = HttpGet("127.0.0.1", metrics_port_, "/metrics");
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return {};
    EXPECT_EQ(response->status, 200) << response->body;
    return ParseSamples(response->body);
  }

  // Submits without waiting; the job's id.
  std::string Submit(const std::string& phantom) {
    ProcessResult r =
        Tomo({"submit", "--spec", phantom + "/job.json", "--data", phantom + "/sinogram.raw"});
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return r.OutLines().empty() ? std::string() : r.OutLines().back();
  }

  // Submits each phantom's job from a thread of its own, all at once: their commits come
  // within the uploads' time of each other, so two workers can only overlap their runs if
  // each job has a device of its own. The ids, in the order given.
  std::vector<std::string> SubmitAtOnce(const std::vector<std::string>& phantoms) {
    std::vector<std::string> ids(phantoms.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < phantoms.size(); ++i) {
      threads.emplace_back([&, i] { ids[i] = Submit(phantoms[i]); });
    }
    for (std::thread& thread : threads) thread.join();
    return ids;
  }

  v1::Job WaitUntil(const std::string& id, const std::function<bool(const v1::Job&)>& done,
                    absl::Duration timeout = absl::Seconds(240)) {
    client::TomoClient client(server());
    const absl::Time deadline = absl::Now() + timeout;
    absl::StatusOr<v1::Job> job = client.GetJob(id);
    while (job.ok() && !done(*job) && !client::IsFinal(job->state()) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(2));
      job = client.GetJob(id);
    }
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : v1::Job();
  }
  v1::Job WaitForEnd(const std::string& id) {
    return WaitUntil(id, [](const v1::Job& job) { return client::IsFinal(job.state()); });
  }

  int metrics_port_ = 0;
};

// Whether two finished jobs' runs overlapped in time.
bool RunsOverlap(const v1::Job& a, const v1::Job& b) {
  auto at = [](const google::protobuf::Timestamp& t) {
    return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
  };
  return at(a.started()) < at(b.finished()) && at(b.started()) < at(a.finished());
}

// The largest absolute difference between two float32 files of the same size, and the
// largest absolute value of the second.
std::pair<float, float> MaxDifference(const std::string& a, const std::string& b) {
  float difference = 0, peak = 0;
  for (size_t at = 0; at + sizeof(float) <= std::min(a.size(), b.size()); at += sizeof(float)) {
    float x, y;
    std::memcpy(&x, a.data() + at, sizeof(float));
    std::memcpy(&y, b.data() + at, sizeof(float));
    difference = std::max(difference, std::abs(x - y));
    peak = std::max(peak, std::abs(y));
  }
  return {difference, peak};
}

TEST_F(MultiDeviceTest, PolicyOffRunsTwoJobsAtOnceOneDeviceEach) {
  Restart({"--devices=cpu,cpu:1", "--multi_device_jobs=off", "--multi_device_min_voxels=0"});
  ASSERT_FALSE(HasFatalFailure());
  // Cone-beam FDK, the kind of job that would split, large enough on the CPU to run long
  // past the other's upload.
  const std::string first = MakePhantom("first", 61, 240, {"--geometry", "cone",
                                                            "--voxel-size", "0.8"});
  const std::string second = MakePhantom("second", 61, 240, {"--geometry", "cone",
                                                              "--voxel-size", "0.8"});
  std::vector<std::string> ids = SubmitAtOnce({first, second});
  ASSERT_THAT(ids, SizeIs(2));
  const v1::Job a = WaitForEnd(ids[0]);
  const v1::Job b = WaitForEnd(ids[1]);
  ASSERT_EQ(a.state(), v1::JOB_STATE_SUCCEEDED) << a.error();
  ASSERT_EQ(b.state(), v1::JOB_STATE_SUCCEEDED) << b.error();
  ASSERT_THAT(a.devices(), SizeIs(1));
  ASSERT_THAT(b.devices(), SizeIs(1));
  EXPECT_EQ(a.device(), a.devices(0));
  EXPECT_EQ(b.device(), b.devices(0));
  EXPECT_THAT((std::vector<std::string>{a.device(), b.device()}),
              UnorderedElementsAre("cpu", "cpu:1"));
  EXPECT_TRUE(RunsOverlap(a, b)) << "the two runs did not overlap: " << a.DebugString()
                                 << b.DebugString();

  std::map<std::string, double> metrics = Scrape();
  EXPECT_EQ(metrics["tomod_job_runs_total{devices=\"1\"}"], 2);
  EXPECT_EQ(metrics.count("tomod_job_runs_total{devices=\"2\"}"), 0u);
  EXPECT_EQ(metrics["tomod_devices_busy"], 0);
}

TEST_F(MultiDeviceTest, LargeJobTakesEveryIdleDeviceAndReconstructsWhatOneDeviceDoes) {
  // An odd grid of 0.7 mm voxels, over the threshold of 45^3 - 1 voxels.
  const int size = 45;
  Restart({"--devices=cpu,cpu:1,cpu:2", "--multi_device_jobs=idle",
           absl::StrCat("--multi_device_min_voxels=", size * size * size - 1)});
  ASSERT_FALSE(HasFatalFailure());
  const std::string phantom =
      MakePhantom("large", size, 150, {"--geometry", "cone", "--voxel-size", "0.7"});
  ProcessResult run = Tomo({"submit", "--spec", phantom + "/job.json", "--data",
                            phantom + "/sinogram.raw", "--wait", "--out", dir() + "/served"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  absl::StatusOr<std::vector<v1::Job>> jobs = client::TomoClient(server()).ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_THAT(*jobs, SizeIs(1));
  const v1::Job& job = jobs->front();
  EXPECT_THAT(job.devices(), UnorderedElementsAre("cpu", "cpu:1", "cpu:2"));
  EXPECT_EQ(job.device(), job.devices(0));

  ProcessResult status = Tomo({"status", job.id()});
  ASSERT_EQ(status.exit_code, 0) << status.Describe();
  EXPECT_THAT(status.out, HasSubstr(absl::StrCat("devices    ", job.devices(0), ", ",
                                                 job.devices(1), ", ", job.devices(2), "\n")));

  ProcessResult local = TomoRaw({"local", "--spec", phantom + "/job.json", "--data",
                                 phantom + "/sinogram.raw", "--out", dir() + "/local",
                                 "--device", "cpu"});
  ASSERT_EQ(local.exit_code, 0) << local.Describe();
  const std::string served = FileBytes(dir() + "/served/volume.raw");
  const std::string expected = FileBytes(dir() + "/local/volume.raw");
  ASSERT_EQ(served.size(), static_cast<size_t>(size) * size * size * 4);
  ASSERT_EQ(served.size(), expected.size());
  const auto [difference, peak] = MaxDifference(served, expected);
  EXPECT_GT(peak, 0.1f);
  // The slabs are computed as the one-device run computes them: bit for bit on the CPU.
  EXPECT_LE(difference, 1e-6f * peak);
  EXPECT_TRUE(served == expected) << "largest difference " << difference;

  std::map<std::string, double> metrics = Scrape();
  EXPECT_EQ(metrics["tomod_job_runs_total{devices=\"3\"}"], 1);
  EXPECT_EQ(metrics["tomod_job_runs_total{devices=\"1\"}"], 0);
  EXPECT_EQ(metrics["tomod_devices_busy"], 0);
}

TEST_F(MultiDeviceTest, SmallJobKeepsOneDeviceAndLeavesTheOtherToASecondJob) {
  // 41^3 voxels, under a threshold of 41^3 + 1: small, though slow on the CPU (many views).
  const int size = 41;
  Restart({"--devices=cpu,cpu:1", "--multi_device_jobs=idle",
           absl::StrCat("--multi_device_min_voxels=", size * size * size + 1)});
  ASSERT_FALSE(HasFatalFailure());
  const std::string first =
      MakePhantom("small1", size, 720, {"--geometry", "cone", "--voxel-size", "1.3"});
  const std::string second =
      MakePhantom("small2", size, 720, {"--geometry", "cone", "--voxel-size", "1.3"});
  std::vector<std::string> ids = SubmitAtOnce({first, second});
  ASSERT_THAT(ids, SizeIs(2));
  const v1::Job a = WaitForEnd(ids[0]);
  const v1::Job b = WaitForEnd(ids[1]);
  ASSERT_EQ(a.state(), v1::JOB_STATE_SUCCEEDED) << a.error();
  ASSERT_EQ(b.state(), v1::JOB_STATE_SUCCEEDED) << b.error();
  ASSERT_THAT(a.devices(), SizeIs(1));
  ASSERT_THAT(b.devices(), SizeIs(1));
  EXPECT_THAT((std::vector<std::string>{a.device(), b.device()}),
              UnorderedElementsAre("cpu", "cpu:1"));
  EXPECT_TRUE(RunsOverlap(a, b)) << "the two runs did not overlap: " << a.DebugString()
                                 << b.DebugString();
  ProcessResult status = Tomo({"status", a.id()});
  EXPECT_THAT(status.out, HasSubstr(absl::StrCat("device     ", a.device(), "\n")));
  std::map<std::string, double> metrics = Scrape();
  EXPECT_EQ(metrics["tomod_job_runs_total{devices=\"1\"}"], 2);
  EXPECT_EQ(metrics.count("tomod_job_runs_total{devices=\"2\"}"), 0u);
}

TEST_F(MultiDeviceTest, CancelledDrainedAndCrashedMultiDeviceJobsGiveAllTheirDevicesBack) {
  const std::vector<std::string> flags = {"--devices=cpu,cpu:1", "--multi_device_jobs=idle",
                                          "--multi_device_min_voxels=1000",
                                          "--drain_timeout=0s"};
  Restart(flags);
  ASSERT_FALSE(HasFatalFailure());
  // Long enough on two CPU workers to be caught running.
  const std::string phantom =
      MakePhantom("long", 81, 360, {"--geometry", "cone", "--voxel-size", "0.9"});
  auto running = [](const v1::Job& job) { return job.state() == v1::JOB_STATE_RUNNING; };

  // Cancelled while running on both devices: both are free for the next job.
  const std::string cancelled = Submit(phantom);
  v1::Job job = WaitUntil(cancelled, running);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_THAT(job.devices(), UnorderedElementsAre("cpu", "cpu:1"));
  {
    client::TomoClient client(server());
    ASSERT_TRUE(client.Cancel(cancelled).ok());
  }
  job = WaitForEnd(cancelled);
  ASSERT_EQ(job.state(), v1::JOB_STATE_CANCELLED);

  const std::string drained = Submit(phantom);
  job = WaitUntil(drained, running);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_THAT(job.devices(), UnorderedElementsAre("cpu", "cpu:1"));
  EXPECT_EQ(Scrape()["tomod_devices_busy"], 2);

  // Stopped by a drain: handed back QUEUED, not counted, and run again after the restart on
  // both devices.
  ASSERT_EQ(StopDaemon(absl::Seconds(60)), 0);
  const std::string log = FileBytes(tomod_log());
  EXPECT_TRUE(absl::StrContains(log, "running on cpu, cpu:1") ||
              absl::StrContains(log, "running on cpu:1, cpu"));
  EXPECT_THAT(log, HasSubstr("queued again: tomod is draining"));
  Restart(flags);
  ASSERT_FALSE(HasFatalFailure());
  job = WaitForEnd(drained);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  EXPECT_EQ(job.attempts(), 1u);
  EXPECT_THAT(job.devices(), UnorderedElementsAre("cpu", "cpu:1"));
  EXPECT_EQ(Scrape()["tomod_devices_busy"], 0);

  // Killed during its run, as a crash: queued again at the start (the run counted), and
  // run on both devices anew.
  const std::string crashed = Submit(phantom);
  job = WaitUntil(crashed, running);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_THAT(job.devices(), SizeIs(2));
  KillDaemon();
  Restart(flags, /*killed=*/true);
  ASSERT_FALSE(HasFatalFailure());
  job = WaitForEnd(crashed);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  EXPECT_EQ(job.attempts(), 2u);
  EXPECT_THAT(job.devices(), UnorderedElementsAre("cpu", "cpu:1"));
  EXPECT_THAT(FileBytes(tomod_log()), HasSubstr("queued again: tomod stopped during run 1"));
}

TEST_F(MultiDeviceTest, BadPolicyIsRefusedNamingTheFlagTheValueAndTheChoices) {
  ASSERT_EQ(StopDaemon(), 0);
  ProcessResult r = RunProcess({BinaryPath("tomod", TOMOD_BINARY), "--listen=127.0.0.1:0",
                                "--spool_dir=" + spool_dir(), "--metrics_port=0",
                                "--devices=cpu,cpu:1", "--multi_device_jobs=sometimes"},
                               dir(), absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_THAT(r.ErrLines(),
              ElementsAre("tomod: --multi_device_jobs: \"sometimes\" is not one of off, idle"));
  // A bad device number is refused the same way as an unknown device.
  r = RunProcess({BinaryPath("tomod", TOMOD_BINARY), "--listen=127.0.0.1:0",
                  "--spool_dir=" + spool_dir(), "--metrics_port=0", "--devices=cpu,cpu:x"},
                 dir(), absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("--devices: cpu:x is not a device here"));
  r = RunProcess({BinaryPath("tomod", TOMOD_BINARY), "--listen=127.0.0.1:0",
                  "--spool_dir=" + spool_dir(), "--metrics_port=0", "--devices=cpu,cpu:0"},
                 dir(), absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("--devices: cpu is listed twice"));
}

}  // namespace
}  // namespace tomo::testing

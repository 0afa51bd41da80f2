// The real tomod and the real tomo binary over loopback: the commands a user types, their
// output, their exit codes and their one-line errors.
#include <sys/stat.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/job_spec_json.h"
#include "client/tomo_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/end_to_end/daemon_fixture.h"
#include "tests/server/security/test_certificates.h"

namespace tomo::testing {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;
using ::testing::HasSubstr;

// tomo's exit codes (client/cli/cli_common.h).
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitJobFailed = 3;
constexpr int kExitNotFound = 4;
constexpr int kExitInvalid = 5;
constexpr int kExitUnavailable = 6;

// FBP (Ram-Lak) of the exact 128 x 128, 180-view Shepp-Logan sinogram against the
// rasterised phantom: measured RMSE 0.0271 on the CPU backend; the bound leaves a little
// room for other backends and rounding.
constexpr double kRmseBound128 = 0.03;

// Waits until the job is in `state` (or any final state when state is UNSPECIFIED).
absl::StatusOr<v1::Job> WaitForState(client::TomoClient& client, const std::string& id,
                                     v1::JobState state, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<v1::Job> job = client.GetJob(id);
    if (!job.ok()) return job;
    if (job->state() == state ||
        (state == v1::JOB_STATE_UNSPECIFIED && client::IsFinal(job->state()))) {
      return job;
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("job ", id, " is still ",
                                                      client::JobStateName(job->state())));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

class CliTest : public DaemonTest {
 protected:
  // Submits (without --wait) and returns the job id printed.
  std::string Submit(const std::string& phantom_dir, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"submit", "--spec", phantom_dir + "/job.json", "--data",
                                     phantom_dir + "/sinogram.raw"};
    args.insert(args.end(), extra.begin(), extra.end());
    ProcessResult r = Tomo(args);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    std::vector<std::string> lines = r.OutLines();
    EXPECT_EQ(lines.size(), 1u) << r.Describe();
    return lines.empty() ? "" : lines[0];
  }
};

TEST_F(CliTest, SubmitWaitFetchesResultCloseToTruth) {
  const std::string phantom = MakePhantom("phantom", 128, 180);
  const std::string out = dir() + "/result";
  ProcessResult r = Tomo({"submit", "--spec", phantom + "/job.json", "--data",
                          phantom + "/sinogram.raw", "--wait", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<std::string> lines = r.OutLines();
  // The job id, then the results' paths: the volume and its JSON sidecar.
  ASSERT_EQ(lines.size(), 3u) << r.Describe();
  EXPECT_FALSE(lines[0].empty());
  EXPECT_EQ(lines[1], out + "/volume.raw");
  EXPECT_EQ(lines[2], out + "/volume.json");
  // Without a terminal, progress is plain lines (no bar redrawn with \r, no escapes).
  for (const std::string& line : r.ErrLines()) {
    EXPECT_EQ(line.rfind("progress: ", 0), 0u) << r.Describe();
  }
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.Describe();
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.Describe();
  EXPECT_EQ(fs::file_size(out + "/volume.raw"), 128u * 128u * 4u);
  EXPECT_FALSE(fs::exists(out + "/volume.raw.partial"));

  ProcessResult compared = TomoRaw({"compare", "--reference", phantom + "/truth.raw", "--image",
                                    out + "/volume.raw"});
  ASSERT_EQ(compared.exit_code, 0) << compared.Describe();
  const double rmse = ParseRmse(compared.out);
  EXPECT_LT(rmse, kRmseBound128) << compared.Describe();
  std::cout << "RMSE of the daemon's 128 x 128 FBP: " << rmse << "\n";

  // --max-rmse turns the comparison into a check.
  ProcessResult strict = TomoRaw({"compare", "--reference", phantom + "/truth.raw", "--image",
                                  out + "/volume.raw", "--max-rmse", "1e-6"});
  EXPECT_EQ(strict.exit_code, kExitError) << strict.Describe();
  EXPECT_TRUE(OneErrorLine(strict));
}

// Fan-beam and cone-beam jobs through the daemon: tomo phantom writes their exact
// projections (ellipse and ellipsoid line integrals), tomod reconstructs them with FBP (fan
// weighting) and FDK. RMSE against the phantoms measured on the CPU backend: 0.0331 for the
// 96^2 fan (360 views) and 0.0518 for the 32^3 cone (180 views; coarse, so the edges of the
// skull dominate); the bounds leave a little room for the GPU's float rounding.
TEST_F(CliTest, FanAndConeJobsReconstructTheirPhantoms) {
  struct Case {
    std::string geometry;
    int size;
    int views;
    std::string dims;
    double bound;
  };
  const std::vector<Case> cases = {{"fan-2d", 96, 360, "1,96,96", 0.036},
                                   {"cone", 32, 180, "32,32,32", 0.056}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.geometry);
    const std::string phantom =
        MakePhantom(c.geometry, c.size, c.views, {"--geometry", c.geometry});
    const std::string out = dir() + "/result-" + c.geometry;
    ProcessResult r = Tomo({"submit", "--spec", phantom + "/job.json", "--data",
                            phantom + "/sinogram.raw", "--wait", "--out", out});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    ProcessResult compared = TomoRaw({"compare", "--reference", phantom + "/truth.raw",
                                      "--image", out + "/volume.raw", "--dims", c.dims});
    ASSERT_EQ(compared.exit_code, 0) << compared.Describe();
    const double rmse = ParseRmse(compared.out);
    EXPECT_LT(rmse, c.bound) << compared.Describe();
    std::cout << "RMSE of the daemon's " << c.geometry << " reconstruction: " << rmse << "\n";

    ProcessResult status = Tomo({"status", r.OutLines()[0]});
    EXPECT_THAT(status.out, HasSubstr(c.geometry == "cone" ? "cone beam" : "fan 2D"))
        << status.Describe();
  }
}

TEST_F(CliTest, SubmitWatchStatusListFetchDelete) {
  const std::string phantom = MakePhantom("phantom", 128, 180);
  const std::string id = Submit(phantom, {"--name", "e2e job", "--priority", "7"});
  ASSERT_FALSE(id.empty());

  ProcessResult watched = Tomo({"watch", id});
  ASSERT_EQ(watched.exit_code, 0) << watched.Describe();
  std::vector<std::string> events = watched.OutLines();
  ASSERT_FALSE(events.empty()) << watched.Describe();
  EXPECT_THAT(events.back(), HasSubstr("SUCCEEDED")) << watched.Describe();
  EXPECT_THAT(events.back(), HasSubstr("100.0%")) << watched.Describe();

  ProcessResult status = Tomo({"status", id});
  ASSERT_EQ(status.exit_code, 0) << status.Describe();
  EXPECT_THAT(status.out, HasSubstr("SUCCEEDED"));
  EXPECT_THAT(status.out, HasSubstr("e2e job"));
  EXPECT_THAT(status.out, HasSubstr("volume.raw"));
  EXPECT_THAT(status.out, HasSubstr("fbp (window ram-lak)"));

  ProcessResult status_json = Tomo({"status", id, "--json"});
  ASSERT_EQ(status_json.exit_code, 0) << status_json.Describe();
  v1::Job job;
  ASSERT_TRUE(client::MessageFromJson(status_json.out, "status --json", &job).ok())
      << status_json.Describe();
  EXPECT_EQ(job.id(), id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.spec().priority(), 7);
  EXPECT_EQ(job.spec().name(), "e2e job");
  ASSERT_EQ(job.results_size(), 2);  // the volume, then its JSON sidecar
  EXPECT_EQ(job.results(0).name(), "volume.raw");
  EXPECT_EQ(job.results(1).name(), "volume.json");

  ProcessResult listed = Tomo({"list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.Describe();
  EXPECT_THAT(listed.out, HasSubstr(id));
  ProcessResult listed_succeeded = Tomo({"list", "--state", "succeeded"});
  EXPECT_THAT(listed_succeeded.out, HasSubstr(id)) << listed_succeeded.Describe();
  ProcessResult listed_active = Tomo({"list", "--state", "queued,running"});
  ASSERT_EQ(listed_active.exit_code, 0) << listed_active.Describe();
  EXPECT_THAT(listed_active.out, ::testing::Not(HasSubstr(id))) << listed_active.Describe();

  // Every result into a directory, then one result into a file.
  const std::string out_dir = dir() + "/fetched";
  ProcessResult fetched = Tomo({"fetch", id, "--out", out_dir});
  ASSERT_EQ(fetched.exit_code, 0) << fetched.Describe();
  EXPECT_EQ(fetched.OutLines(),
            (std::vector<std::string>{out_dir + "/volume.raw", out_dir + "/volume.json"}));
  const std::string bytes = FileBytes(out_dir + "/volume.raw");
  EXPECT_EQ(bytes.size(), 128u * 128u * 4u);
  EXPECT_EQ(client::Crc32Update(0, bytes.data(), bytes.size()), job.results(0).crc32());

  const std::string out_file = dir() + "/one.raw";
  ProcessResult fetched_one = Tomo({"fetch", id, "--name", "volume.raw", "--out", out_file});
  ASSERT_EQ(fetched_one.exit_code, 0) << fetched_one.Describe();
  EXPECT_EQ(FileBytes(out_file), bytes);

  ProcessResult no_such_result = Tomo({"fetch", id, "--name", "nope.raw", "--out", out_file});
  EXPECT_EQ(no_such_result.exit_code, kExitNotFound) << no_such_result.Describe();
  EXPECT_TRUE(OneErrorLine(no_such_result));

  ProcessResult deleted = Tomo({"delete", id});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.Describe();
  EXPECT_TRUE(JobDirs(spool_dir()).empty()) << "the job's files are still in the spool";

  ProcessResult gone = Tomo({"status", id});
  EXPECT_EQ(gone.exit_code, kExitNotFound) << gone.Describe();
  EXPECT_TRUE(OneErrorLine(gone));
  EXPECT_THAT(gone.err, HasSubstr(id));
  ProcessResult listed_after = Tomo({"list"});
  ASSERT_EQ(listed_after.exit_code, 0) << listed_after.Describe();
  EXPECT_THAT(listed_after.out, ::testing::Not(HasSubstr(id)));
  ProcessResult deleted_again = Tomo({"delete", id});
  EXPECT_EQ(deleted_again.exit_code, kExitNotFound) << deleted_again.Describe();
  EXPECT_TRUE(OneErrorLine(deleted_again));
  ProcessResult watch_gone = Tomo({"watch", id});
  EXPECT_EQ(watch_gone.exit_code, kExitNotFound) << watch_gone.Describe();
  EXPECT_TRUE(OneErrorLine(watch_gone));
}

TEST_F(CliTest, FetchResumesAPartialFileAndRejectsACorruptOne) {
  const std::string phantom = MakePhantom("phantom", 128, 180);
  ProcessResult r = Tomo({"submit", "--spec", phantom + "/job.json", "--data",
                          phantom + "/sinogram.raw", "--wait", "--out", dir() + "/result"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const std::string id = r.OutLines().at(0);
  const std::string full = FileBytes(dir() + "/result/volume.raw");
  ASSERT_EQ(full.size(), 128u * 128u * 4u);
  auto fetch_to = [&](const std::string& path, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"fetch", id, "--name", "volume.raw", "--out", path};
    args.insert(args.end(), extra.begin(), extra.end());
    return Tomo(args);
  };

  // A good first half: only the rest is fetched, and the whole file verifies.
  const std::string resumed = dir() + "/resumed.raw";
  WriteBytes(resumed + ".partial", full.substr(0, full.size() / 2));
  ProcessResult ok = fetch_to(resumed);
  ASSERT_EQ(ok.exit_code, 0) << ok.Describe();
  EXPECT_EQ(FileBytes(resumed), full);
  EXPECT_FALSE(fs::exists(resumed + ".partial"));

  // A corrupt first half: the final CRC-32 catches it, the partial file is removed and the
  // next fetch starts over.
  const std::string corrupt = dir() + "/corrupt.raw";
  std::string bad = full.substr(0, full.size() / 2);
  for (size_t i = 0; i < bad.size(); i += 997) bad[i] = static_cast<char>(bad[i] ^ 0x5a);
  WriteBytes(corrupt + ".partial", bad);
  ProcessResult refused = fetch_to(corrupt);
  EXPECT_EQ(refused.exit_code, kExitError) << refused.Describe();
  EXPECT_TRUE(OneErrorLine(refused));
  EXPECT_THAT(refused.err, HasSubstr("CRC-32"));
  EXPECT_FALSE(fs::exists(corrupt));
  EXPECT_FALSE(fs::exists(corrupt + ".partial"));
  ProcessResult again = fetch_to(corrupt);
  ASSERT_EQ(again.exit_code, 0) << again.Describe();
  EXPECT_EQ(FileBytes(corrupt), full);

  // A partial file longer than the result is not this result's: start over.
  const std::string longer = dir() + "/longer.raw";
  WriteBytes(longer + ".partial", full + "trailing bytes");
  ProcessResult restarted = fetch_to(longer);
  ASSERT_EQ(restarted.exit_code, 0) << restarted.Describe();
  EXPECT_EQ(FileBytes(longer), full);

  // --no-resume ignores whatever partial file there is.
  const std::string fresh = dir() + "/fresh.raw";
  WriteBytes(fresh + ".partial", std::string(1000, 'x'));
  ProcessResult no_resume = fetch_to(fresh, {"--no-resume"});
  ASSERT_EQ(no_resume.exit_code, 0) << no_resume.Describe();
  EXPECT_EQ(FileBytes(fresh), full);
}

TEST_F(CliTest, CancelQueuedJobAndRunningJob) {
  // One worker per device: a long job keeps it busy and the next one waits in the queue.
  // The daemon runs on the CPU alone (--devices cpu), where even the first size takes
  // long enough on most machines; on a GPU a job ends before `tomo cancel` can reach it.
  // "Long" still depends on the machine, so the blocking job grows until the small one is
  // caught in the queue.
  ASSERT_EQ(StopDaemon(), 0);
  StartDaemon({"--devices", "cpu"});
  const std::string small = MakePhantom("small", 64, 90);
  client::TomoClient client(server());
  std::string big_id, small_id;
  const std::pair<int, int> blocker_sizes[] = {{512, 720}, {1024, 1440}, {2048, 2880}};
  for (const auto& [size, views] : blocker_sizes) {
    const std::string big = MakePhantom(absl::StrCat("big", size), size, views);
    const std::string id = Submit(big);
    ASSERT_FALSE(id.empty());
    // Wait until it has left the queue (running, or already done on a fast device).
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    absl::StatusOr<v1::Job> job = client.GetJob(id);
    while (job.ok() && job->state() == v1::JOB_STATE_QUEUED && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
      job = client.GetJob(id);
    }
    ASSERT_TRUE(job.ok()) << job.status();
    const std::string candidate = Submit(small, {"--priority", "-5"});
    ASSERT_FALSE(candidate.empty());
    ProcessResult cancelled = Tomo({"cancel", candidate});
    ASSERT_EQ(cancelled.exit_code, 0) << cancelled.Describe();
    if (cancelled.out == candidate + " CANCELLED\n") {  // it was still queued
      big_id = id;
      small_id = candidate;
      break;
    }
    std::cout << "a " << size << " x " << size << " job did not keep the worker busy long "
              << "enough (cancel said: " << cancelled.out << "); trying a larger one\n";
    absl::StatusOr<v1::Job> ended =
        WaitForState(client, candidate, v1::JOB_STATE_UNSPECIFIED, absl::Seconds(300));
    ASSERT_TRUE(ended.ok()) << ended.status();
  }
  if (small_id.empty()) GTEST_SKIP() << "the device is too fast to keep a job queued";

  // Cancel the running job at once, while it most likely still runs: it stops at its next
  // step. On a fast machine it may have finished already (cancel then says so, naming the
  // state) or finish during its last step; either way it ends and the watch says how.
  // The deterministic version of this check is in reconstruction_service_test.
  ProcessResult cancel_big = Tomo({"cancel", big_id});
  const bool finished_first =
      cancel_big.exit_code != 0 && absl::StrContains(cancel_big.err, "is SUCCEEDED");
  ASSERT_TRUE(cancel_big.exit_code == 0 || finished_first) << cancel_big.Describe();
  ProcessResult watch_big = Tomo({"watch", big_id});
  absl::StatusOr<v1::Job> big_job = client.GetJob(big_id);
  ASSERT_TRUE(big_job.ok()) << big_job.status();
  if (big_job->state() == v1::JOB_STATE_CANCELLED) {
    EXPECT_EQ(watch_big.exit_code, kExitJobFailed) << watch_big.Describe();
    EXPECT_TRUE(OneErrorLine(watch_big));
  } else {
    EXPECT_EQ(big_job->state(), v1::JOB_STATE_SUCCEEDED);
    EXPECT_EQ(watch_big.exit_code, 0) << watch_big.Describe();
    std::cout << "note: the running job finished before the cancel took effect\n";
  }

  absl::StatusOr<v1::Job> small_job = client.GetJob(small_id);
  ASSERT_TRUE(small_job.ok()) << small_job.status();
  EXPECT_EQ(small_job->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(small_job->results_size(), 0);

  ProcessResult watch_small = Tomo({"watch", small_id});
  EXPECT_EQ(watch_small.exit_code, kExitJobFailed) << watch_small.Describe();
  EXPECT_TRUE(OneErrorLine(watch_small));
  EXPECT_THAT(watch_small.err, HasSubstr("CANCELLED"));
  ProcessResult status_small = Tomo({"status", small_id});
  EXPECT_EQ(status_small.exit_code, 0) << status_small.Describe();
  EXPECT_THAT(status_small.out, HasSubstr("CANCELLED"));
  ProcessResult fetch_small = Tomo({"fetch", small_id, "--out", dir() + "/none"});
  EXPECT_EQ(fetch_small.exit_code, kExitJobFailed) << fetch_small.Describe();
  EXPECT_TRUE(OneErrorLine(fetch_small));
  ProcessResult listed = Tomo({"list", "--state", "cancelled"});
  EXPECT_THAT(listed.out, HasSubstr(small_id)) << listed.Describe();
}

// Each bad spec is refused with INVALID_ARGUMENT (exit 5) and one stderr line naming the
// field; nothing is stored; the daemon goes on serving.
TEST_F(CliTest, BadSpecsAreRefusedAndTheDaemonKeepsServing) {
  const std::string phantom = MakePhantom("phantom", 64, 90);
  const std::string data = phantom + "/sinogram.raw";
  absl::StatusOr<v1::JobSpec> good = client::ReadJobSpecFile(phantom + "/job.json");
  ASSERT_TRUE(good.ok()) << good.status();
  const std::string good_json = client::MessageToJson(*good);

  struct Case {
    std::string name;
    std::string json;
    std::string data_path;
    std::string expected;  // in the stderr line
  };
  std::vector<Case> cases;
  auto modified = [&](const std::string& name, auto&& change, const std::string& expected) {
    v1::JobSpec spec = *good;
    change(spec);
    cases.push_back({name, client::MessageToJson(spec), data, expected});
  };
  modified("zero_views", [](v1::JobSpec& s) {
    s.mutable_geometry()->mutable_parallel_2d()->mutable_angles()->mutable_uniform()->set_count(0);
  }, "geometry.parallel_2d.angles.uniform.count");
  modified("zero_detectors", [](v1::JobSpec& s) {
    s.mutable_geometry()->mutable_parallel_2d()->set_num_detectors(0);
  }, "geometry.parallel_2d.num_detectors");
  modified("negative_detector_spacing", [](v1::JobSpec& s) {
    s.mutable_geometry()->mutable_parallel_2d()->set_detector_spacing_mm(-0.5);
  }, "geometry.parallel_2d.detector_spacing_mm");
  modified("negative_pixel_size", [](v1::JobSpec& s) {
    s.mutable_volume()->mutable_voxel_size_mm()->set_x(-0.5);
  }, "volume.voxel_size_mm.x");
  modified("unset_algorithm", [](v1::JobSpec& s) { s.clear_algorithm(); }, "algorithm");
  modified("priority_out_of_range", [](v1::JobSpec& s) { s.set_priority(1000); }, "priority");
  // The spec's size agrees with the data file but not with its geometry.
  {
    v1::JobSpec spec = *good;
    spec.mutable_input()->set_size_bytes(1000);
    WriteBytes(dir() + "/1000.raw", std::string(1000, '\0'));
    cases.push_back({"size_not_matching_geometry", client::MessageToJson(spec),
                     dir() + "/1000.raw", "input.size_bytes"});
  }
  // The data file does not match the spec: refused before anything is sent.
  cases.push_back({"data_not_matching_size", good_json, dir() + "/1000.raw", "input.size_bytes"});
  // Not a JobSpec at all: refused when reading the file, naming it.
  cases.push_back({"unknown_algorithm", absl::StrReplaceAll(good_json, {{"\"fbp\"", "\"sart\""}}),
                   data, "sart"});
  cases.push_back({"unknown_window",
                   absl::StrReplaceAll(good_json, {{"FILTER_WINDOW_RAM_LAK", "FILTER_WINDOW_FOO"}}),
                   data, "window"});
  cases.push_back({"not_json", "{ this is not json", data, "bad_not_json.json"});

  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string spec_path = dir() + "/bad_" + c.name + ".json";
    WriteBytes(spec_path, c.json);
    ProcessResult r = Tomo({"submit", "--spec", spec_path, "--data", c.data_path});
    EXPECT_EQ(r.exit_code, kExitInvalid) << r.Describe();
    EXPECT_TRUE(OneErrorLine(r));
    EXPECT_THAT(r.err, HasSubstr(c.expected)) << r.Describe();
    EXPECT_TRUE(r.out.empty()) << r.Describe();
    EXPECT_TRUE(JobDirs(spool_dir()).empty()) << "a refused job left files in the spool";

    // `tomo local` validates with the same code and says the same.
    ProcessResult local = TomoRaw({"local", "--spec", spec_path, "--data", c.data_path, "--out",
                                   dir() + "/local_" + c.name});
    EXPECT_EQ(local.exit_code, kExitInvalid) << local.Describe();
    EXPECT_TRUE(OneErrorLine(local));
    EXPECT_THAT(local.err, HasSubstr(c.expected)) << local.Describe();
  }

  ProcessResult info = Tomo({"info"});
  EXPECT_EQ(info.exit_code, 0) << info.Describe();
  EXPECT_THAT(info.out, HasSubstr("fbp"));
  ProcessResult listed = Tomo({"list"});
  EXPECT_EQ(listed.exit_code, 0) << listed.Describe();
  EXPECT_EQ(listed.out, "") << "a refused spec created a job";
  ProcessResult listed_json = Tomo({"list", "--json"});
  ASSERT_EQ(listed_json.exit_code, 0) << listed_json.Describe();
  v1::ListJobsResponse response;
  ASSERT_TRUE(client::MessageFromJson(listed_json.out, "list --json", &response).ok());
  EXPECT_EQ(response.jobs_size(), 0);

  // And a good job still goes through.
  ProcessResult r = Tomo({"submit", "--spec", phantom + "/job.json", "--data", data, "--wait",
                          "--out", dir() + "/good"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
}

TEST_F(CliTest, LocalGivesTheSameBytesAsTheDaemon) {
  const std::string phantom = MakePhantom("phantom", 128, 180, {"--window", "hann"});
  ProcessResult remote = Tomo({"submit", "--spec", phantom + "/job.json", "--data",
                               phantom + "/sinogram.raw", "--wait", "--out", dir() + "/remote"});
  ASSERT_EQ(remote.exit_code, 0) << remote.Describe();
  const std::string id = remote.OutLines().at(0);
  client::TomoClient client(server());
  absl::StatusOr<v1::Job> job = client.GetJob(id);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_FALSE(job->device().empty());

  // On the device the daemon used, so that the arithmetic is the same.
  ProcessResult local = TomoRaw({"local", "--spec", phantom + "/job.json", "--data",
                                 phantom + "/sinogram.raw", "--out", dir() + "/local",
                                 "--device", job->device()});
  ASSERT_EQ(local.exit_code, 0) << local.Describe();
  EXPECT_EQ(local.OutLines(), (std::vector<std::string>{dir() + "/local/volume.raw",
                                                        dir() + "/local/volume.json"}));
  const std::string remote_bytes = FileBytes(dir() + "/remote/volume.raw");
  ASSERT_EQ(remote_bytes.size(), 128u * 128u * 4u);
  EXPECT_TRUE(remote_bytes == FileBytes(dir() + "/local/volume.raw"))
      << "tomo local and tomod (" << job->device() << ") wrote different bytes";

  ProcessResult no_device = TomoRaw({"local", "--spec", phantom + "/job.json", "--data",
                                     phantom + "/sinogram.raw", "--out", dir() + "/x",
                                     "--device", "cuda:99"});
  EXPECT_EQ(no_device.exit_code, kExitUsage) << no_device.Describe();
  EXPECT_TRUE(OneErrorLine(no_device));
}

// tomo cor on a fan-beam phantom whose axis is on the detector's centre: opposing rays find
// the centre column, (columns - 1) / 2, and the line to put in the spec names the field.
TEST_F(CliTest, CorFindsTheCentreOfAFanScan) {
  const std::string phantom = MakePhantom("fan", 64, 180, {"--geometry", "fan-2d"});
  absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(phantom + "/job.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const double middle = 0.5 * (spec->geometry().fan_2d().num_detectors() - 1);
  ProcessResult cor = TomoRaw({"cor", "--spec", phantom + "/job.json", "--data",
                               phantom + "/sinogram.raw", "--device", "cpu"});
  ASSERT_EQ(cor.exit_code, 0) << cor.Describe();
  const std::vector<std::string> lines = cor.OutLines();
  ASSERT_EQ(lines.size(), 2u) << cor.Describe();
  EXPECT_THAT(lines[0], HasSubstr("estimated by opposing rays"));
  const std::string prefix = "geometry.fan_2d.center_of_rotation.column = ";
  ASSERT_EQ(lines[1].rfind(prefix, 0), 0u) << lines[1];
  EXPECT_NEAR(std::stod(lines[1].substr(prefix.size())), middle, 0.05);

  // An unknown method is a usage error, in one line.
  ProcessResult bad = TomoRaw({"cor", "--spec", phantom + "/job.json", "--data",
                               phantom + "/sinogram.raw", "--method", "nonsense"});
  EXPECT_EQ(bad.exit_code, kExitUsage) << bad.Describe();
  EXPECT_TRUE(OneErrorLine(bad));
}

// A lowered --memory-budget reconstructs in z-slabs with the same bytes as the unsplit run
// (all views fit beside 5 of the 32 slices: 7 slabs; the back projection is voxel-wise).
TEST_F(CliTest, LocalWithASmallMemoryBudgetGivesTheSameBytes) {
  const std::string phantom = MakePhantom("cone", 32, 90, {"--geometry", "cone"});
  const std::string data = phantom + "/sinogram.raw";
  ProcessResult whole = TomoRaw({"local", "--spec", phantom + "/job.json", "--data", data,
                                 "--out", dir() + "/whole", "--device", "cpu"});
  ASSERT_EQ(whole.exit_code, 0) << whole.Describe();
  const uint64_t projection_bytes = FileBytes(data).size();  // float32 on the CPU
  const uint64_t slice_bytes = 32 * 32 * 4;
  ProcessResult slabs = TomoRaw(
      {"local", "--spec", phantom + "/job.json", "--data", data, "--out", dir() + "/slabs",
       "--device", "cpu", "--memory-budget", absl::StrCat(projection_bytes + 5 * slice_bytes)});
  ASSERT_EQ(slabs.exit_code, 0) << slabs.Describe();
  const std::string whole_bytes = FileBytes(dir() + "/whole/volume.raw");
  ASSERT_EQ(whole_bytes.size(), 32u * 32u * 32u * 4u);
  EXPECT_TRUE(whole_bytes == FileBytes(dir() + "/slabs/volume.raw"))
      << "the slab-split run wrote different bytes";

  // Not even one slice and one view: the job fails naming the budget.
  ProcessResult tiny = TomoRaw({"local", "--spec", phantom + "/job.json", "--data", data,
                                "--out", dir() + "/tiny", "--device", "cpu", "--memory-budget",
                                "1000"});
  EXPECT_EQ(tiny.exit_code, kExitJobFailed) << tiny.Describe();
  EXPECT_TRUE(OneErrorLine(tiny));
  EXPECT_THAT(tiny.err, HasSubstr("memory budget of 1000 bytes"));
}

TEST_F(CliTest, InfoListsDevicesAlgorithmsAndLimits) {
  // The devices are those --devices names (the default, every GPU or else the CPU, depends
  // on the machine).
  ASSERT_EQ(StopDaemon(), 0);
  StartDaemon({"--devices", "cpu", "--max_jobs_per_client=7", "--max_iterations=33",
               "--max_queue_length=44", "--result_ttl=90m"});
  ProcessResult info = Tomo({"info"});
  ASSERT_EQ(info.exit_code, 0) << info.Describe();
  EXPECT_THAT(info.out, HasSubstr("version"));
  EXPECT_THAT(info.out, HasSubstr("device     cpu"));
  EXPECT_THAT(info.out, HasSubstr("fbp"));
  // Every limit, on a line named by the flag that sets it.
  for (const char* line :
       {"limits     --max_jobs_per_client 7\n", "limits     --max_iterations      33\n",
        "limits     --max_queue_length    44\n", "limits     --result_ttl          1h30m\n",
        "limits     --max_spool_bytes     none\n", "limits     --memory_budget_bytes none\n",
        "limits     --max_attempts        3\n", "limits     --max_views           100000\n",
        "limits     --max_voxels          4294967296\n", "limits     --max_upload_bytes"}) {
    EXPECT_THAT(info.out, HasSubstr(line));
  }

  ProcessResult json = Tomo({"info", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.Describe();
  v1::ServerInfo server_info;
  ASSERT_TRUE(client::MessageFromJson(json.out, "info --json", &server_info).ok()) << json.out;
  EXPECT_FALSE(server_info.version().empty());
  EXPECT_GE(server_info.devices_size(), 1);
  EXPECT_GT(server_info.limits().max_upload_bytes(), 0u);
  EXPECT_EQ(server_info.limits().max_jobs_per_client(), 7u);
  EXPECT_EQ(server_info.limits().max_iterations(), 33u);

  // TOMO_SERVER is the default of --server.
  ProcessResult from_env = TomoRaw({"info"}, kTomoTimeout, {"TOMO_SERVER=" + server()});
  EXPECT_EQ(from_env.exit_code, 0) << from_env.Describe();
  EXPECT_THAT(from_env.out, HasSubstr(server()));
}

// `tomo health` is what container health checks and probes run: SERVING and exit 0 while
// tomod serves; exit 1 naming NOT_SERVING for a part that does not (admission, when the
// spool's file system has less free space than --min_free_spool_bytes); NOT_FOUND for a
// service tomod does not know; unreachable once tomod has stopped.
TEST_F(CliTest, HealthReportsServingNotServingAndUnreachable) {
  ProcessResult serving = Tomo({"health"});
  ASSERT_EQ(serving.exit_code, 0) << serving.Describe();
  EXPECT_EQ(serving.out, "SERVING\n");
  ProcessResult reconstruction = Tomo({"health", "--service", "tomoserve.v1.Reconstruction"});
  EXPECT_EQ(reconstruction.exit_code, 0) << reconstruction.Describe();

  ProcessResult unknown = Tomo({"health", "--service", "no.such.Service"});
  EXPECT_EQ(unknown.exit_code, kExitNotFound) << unknown.Describe();
  EXPECT_TRUE(OneErrorLine(unknown));

  // 1 EiB free can be on no disk: tomod starts degraded.
  ASSERT_EQ(StopDaemon(), 0);
  StartDaemon({"--devices=cpu", "--min_free_spool_bytes=1152921504606846976"});
  ProcessResult whole = Tomo({"health"});
  EXPECT_EQ(whole.exit_code, 0) << whole.Describe();
  ProcessResult admission =
      Tomo({"health", "--service", "tomoserve.v1.Reconstruction.admission"});
  EXPECT_EQ(admission.exit_code, kExitError) << admission.Describe();
  EXPECT_TRUE(OneErrorLine(admission));
  EXPECT_THAT(admission.err, HasSubstr("NOT_SERVING"));
  EXPECT_TRUE(admission.out.empty()) << admission.Describe();

  const std::string address = server();
  ASSERT_EQ(StopDaemon(), 0);
  ProcessResult gone = TomoRaw({"--server", address, "health", "--timeout", "2"});
  EXPECT_EQ(gone.exit_code, kExitUnavailable) << gone.Describe();
  EXPECT_TRUE(OneErrorLine(gone));
}

// The container's health check over TLS: the CA suffices, no token is needed (tomod has
// tokens on); a plain-text check of the TLS port fails. Under mutual TLS the check needs a
// client certificate too.
TEST_F(CliTest, HealthOverTlsNeedsTheCaButNoToken) {
  ASSERT_EQ(StopDaemon(), 0);
  const std::string certs = dir() + "/certs";
  absl::Status made = MakeDevCertificates(certs);
  ASSERT_TRUE(made.ok()) << made;
  std::mt19937_64 random(std::random_device{}());
  const std::string tokens = dir() + "/tokens";
  WriteBytes(tokens, absl::StrCat(absl::Hex(random(), absl::kZeroPad16), " lab user\n"));
  ASSERT_EQ(chmod(tokens.c_str(), 0600), 0);
  const std::vector<std::string> tls = {
      "--devices=cpu", "--tls_cert_file=" + certs + "/server.crt",
      "--tls_key_file=" + certs + "/server.key", "--tokens_file=" + tokens};
  StartDaemon(tls);
  ProcessResult serving = Tomo({"--tls-ca", certs + "/ca.crt", "health"});
  EXPECT_EQ(serving.exit_code, 0) << serving.Describe();
  EXPECT_EQ(serving.out, "SERVING\n");
  ProcessResult plain = Tomo({"health", "--timeout", "3"});
  EXPECT_EQ(plain.exit_code, kExitUnavailable) << plain.Describe();
  EXPECT_TRUE(OneErrorLine(plain));

  ASSERT_EQ(StopDaemon(), 0);
  std::vector<std::string> mutual = tls;
  mutual.push_back("--tls_client_ca_file=" + certs + "/ca.crt");
  StartDaemon(mutual);
  ProcessResult no_client_certificate =
      Tomo({"--tls-ca", certs + "/ca.crt", "health", "--timeout", "3"});
  EXPECT_EQ(no_client_certificate.exit_code, kExitUnavailable)
      << no_client_certificate.Describe();
  ProcessResult with_client_certificate =
      Tomo({"--tls-ca", certs + "/ca.crt", "--tls-cert", certs + "/client.crt", "--tls-key",
            certs + "/client.key", "health"});
  EXPECT_EQ(with_client_certificate.exit_code, 0) << with_client_certificate.Describe();
}

TEST_F(CliTest, UsageAndConnectionErrorsAreOneLine) {
  struct Case {
    std::vector<std::string> args;
    int exit_code;
  };
  const std::vector<Case> cases = {
      {{}, kExitUsage},
      {{"bogus"}, kExitUsage},
      {{"status"}, kExitUsage},
      {{"submit", "--data", "x.raw"}, kExitUsage},
      {{"list", "--state", "sleeping"}, kExitUsage},
      {{"phantom", "--out-dir", dir() + "/p", "--window", "triangle"}, kExitUsage},
      {{"--server", "127.0.0.1:1", "info"}, kExitUnavailable},
      {{"--server", "127.0.0.1:1", "status", "42"}, kExitUnavailable},
      {{"submit", "--spec", dir() + "/missing.json", "--data", "x.raw"}, kExitNotFound},
  };
  for (const Case& c : cases) {
    ProcessResult r = TomoRaw(c.args);
    SCOPED_TRACE(r.command);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.Describe();
    EXPECT_TRUE(OneErrorLine(r));
    EXPECT_TRUE(r.out.empty()) << r.Describe();
  }
  ProcessResult help = TomoRaw({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.Describe();
  EXPECT_THAT(help.out, HasSubstr("Exit codes"));
  ProcessResult unknown_job = Tomo({"status", "no-such-job"});
  EXPECT_EQ(unknown_job.exit_code, kExitNotFound) << unknown_job.Describe();
  EXPECT_TRUE(OneErrorLine(unknown_job));
}

// SIGTERM with a job running and one queued: tomod still exits 0, and in time.
TEST_F(CliTest, SigtermWithWorkInFlightExitsZero) {
  const std::string phantom = MakePhantom("phantom", 256, 360);
  const std::string first = Submit(phantom);
  const std::string second = Submit(phantom);
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(StopDaemon(absl::Seconds(120)), 0) << FileBytes(tomod_log());
}

}  // namespace
}  // namespace tomo::testing

// Observability on the real tomod: its Prometheus endpoint scraped over HTTP after a job
// ran through submit, run and fetch, with every counter and stage histogram checked; and
// its structured log, one JSON object a line, with every state change of the job.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
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

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Key;

class ObservabilityTest : public DaemonTest {
 protected:
  std::map<std::string, double> Scrape() {
    absl::StatusOr<HttpResponse> response = HttpGet("127.0.0.1", port_, "/metrics");
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return {};
    EXPECT_EQ(response->status, 200) << response->body;
    EXPECT_EQ(response->headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    return ParseSamples(response->body);
  }
  int port_ = 0;
};

TEST_F(ObservabilityTest, ScrapeAfterAJobShowsTheCountersMoved) {
  ASSERT_EQ(StopDaemon(), 0);
  port_ = FreeLoopbackPort();
  StartDaemon({"--devices=cpu", absl::StrCat("--metrics_port=", port_)});
  ASSERT_FALSE(HasFatalFailure());
  std::map<std::string, double> before = Scrape();
  EXPECT_EQ(before["tomod_jobs_submitted_total"], 0);
  EXPECT_EQ(before["tomod_queue_depth"], 0);
  EXPECT_THAT(before, Contains(Key("tomod_device_memory_total_bytes{device=\"cpu\"}")));

  const std::string phantom = MakePhantom("metrics", 64, 90);
  const std::string out = dir() + "/out";
  ProcessResult run = Tomo({"submit", "--spec", phantom + "/job.json", "--data",
                            phantom + "/sinogram.raw", "--wait", "--out", out});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  const uint64_t input_bytes = std::filesystem::file_size(phantom + "/sinogram.raw");

  std::map<std::string, double> after = Scrape();
  EXPECT_EQ(after["tomod_jobs_submitted_total"], 1);
  EXPECT_EQ(after["tomod_jobs_finished_total{outcome=\"succeeded\"}"], 1);
  EXPECT_EQ(after["tomod_jobs_finished_total{outcome=\"failed\"}"], 0);
  EXPECT_EQ(after["tomod_upload_bytes_total"], static_cast<double>(input_bytes));
  // Two results were fetched: the volume and its JSON sidecar.
  EXPECT_EQ(after["tomod_fetch_bytes_total"],
            static_cast<double>(std::filesystem::file_size(out + "/volume.raw") +
                                std::filesystem::file_size(out + "/volume.json")));
  EXPECT_EQ(std::filesystem::file_size(out + "/volume.raw"), 64u * 64u * 4u);
  for (const char* stage : {"upload", "queue_wait", "run", "fetch"}) {
    const double times = std::string(stage) == "fetch" ? 2 : 1;
    const std::string labels = absl::StrCat("{stage=\"", stage, "\"}");
    EXPECT_EQ(after["tomod_stage_duration_seconds_count" + labels], times) << stage;
    EXPECT_EQ(after[absl::StrCat("tomod_stage_duration_seconds_bucket{stage=\"", stage,
                                 "\",le=\"+Inf\"}")],
              times)
        << stage;
    EXPECT_GE(after["tomod_stage_duration_seconds_sum" + labels], 0) << stage;
  }
  EXPECT_GT(after["tomod_stage_duration_seconds_sum{stage=\"run\"}"], 0);
  EXPECT_EQ(after["tomod_jobs{state=\"succeeded\"}"], 1);
  EXPECT_EQ(after["tomod_jobs{state=\"queued\"}"], 0);
  EXPECT_EQ(after["tomod_queue_depth"], 0);
  EXPECT_GT(after["tomod_spool_used_bytes"], static_cast<double>(input_bytes));
}

// Freed large host arrays are kept for later ones of their size up to
// --kept_host_memory_bytes, and tomod_kept_host_bytes shows what is kept: after a cone job
// with a volume above the pool's 32 MiB threshold, at least that volume by default, nothing
// with the flag at 0. A flag below -1 is refused, naming it.
TEST_F(ObservabilityTest, KeptHostMemoryIsShownAndBoundedByItsFlag) {
  ASSERT_EQ(StopDaemon(), 0);
  ProcessResult refused = RunProcess(
      {BinaryPath("tomod", TOMOD_BINARY), "--listen=127.0.0.1:0", "--spool_dir=" + spool_dir(),
       "--metrics_port=0", "--devices=cpu", "--kept_host_memory_bytes=-2"},
      dir(), absl::Seconds(60));
  EXPECT_EQ(refused.exit_code, 2) << refused.Describe();
  EXPECT_THAT(refused.err, HasSubstr("--kept_host_memory_bytes: -2 is below -1"));

  const int size = 205;  // 205^3 floats: 34.5 MB
  const std::string phantom = MakePhantom("kept", size, 16, {"--geometry", "cone"});
  for (bool keep : {false, true}) {
    SCOPED_TRACE(keep ? "default" : "--kept_host_memory_bytes=0");
    port_ = FreeLoopbackPort();
    std::vector<std::string> flags = {"--devices=cpu", absl::StrCat("--metrics_port=", port_)};
    if (!keep) flags.push_back("--kept_host_memory_bytes=0");
    StartDaemon(flags);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(Scrape()["tomod_kept_host_bytes"], 0);
    ProcessResult run =
        Tomo({"submit", "--spec", phantom + "/job.json", "--data", phantom + "/sinogram.raw",
              "--wait", "--out", dir() + (keep ? "/kept" : "/not-kept")});
    ASSERT_EQ(run.exit_code, 0) << run.Describe();
    // The job's arrays are freed once its results are written, around its end: wait a little.
    double kept = Scrape()["tomod_kept_host_bytes"];
    for (int i = 0; keep && kept == 0 && i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      kept = Scrape()["tomod_kept_host_bytes"];
    }
    if (keep) {
      EXPECT_GE(kept, static_cast<double>(size) * size * size * 4);
    } else {
      EXPECT_EQ(kept, 0);
    }
    ASSERT_EQ(StopDaemon(), 0);
  }
}

// A cone-beam FDK job reconstructed while it uploads (--reconstruct_while_uploading=all
// lets the CPU worker follow uploads): counted "used", and its volume is the one `tomo
// local` computes from the same files (up to float summation order: the cancellable local
// run back projects in blocks of views).
TEST_F(ObservabilityTest, ConeJobReconstructedWhileUploadingMatchesALocalRun) {
  ASSERT_EQ(StopDaemon(), 0);
  port_ = FreeLoopbackPort();
  StartDaemon({"--devices=cpu", "--reconstruct_while_uploading=all",
               absl::StrCat("--metrics_port=", port_)});
  ASSERT_FALSE(HasFatalFailure());
  const std::string phantom = MakePhantom("cone", 32, 90, {"--geometry", "cone"});
  ProcessResult run = Tomo({"submit", "--spec", phantom + "/job.json", "--data",
                            phantom + "/sinogram.raw", "--wait", "--out", dir() + "/served"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  std::map<std::string, double> after = Scrape();
  EXPECT_EQ(after["tomod_upload_followed_total{outcome=\"used\"}"], 1);
  EXPECT_EQ(after["tomod_jobs_finished_total{outcome=\"succeeded\"}"], 1);

  ProcessResult local = TomoRaw({"local", "--spec", phantom + "/job.json", "--data",
                                 phantom + "/sinogram.raw", "--out", dir() + "/local",
                                 "--device", "cpu"});
  ASSERT_EQ(local.exit_code, 0) << local.Describe();
  const std::string served = FileBytes(dir() + "/served/volume.raw");
  const std::string expected = FileBytes(dir() + "/local/volume.raw");
  ASSERT_EQ(served.size(), 32u * 32u * 32u * 4u);
  ASSERT_EQ(served.size(), expected.size());
  float max_difference = 0, peak = 0;
  for (size_t at = 0; at < served.size(); at += sizeof(float)) {
    float a, b;
    std::memcpy(&a, served.data() + at, sizeof(float));
    std::memcpy(&b, expected.data() + at, sizeof(float));
    max_difference = std::max(max_difference, std::abs(a - b));
    peak = std::max(peak, std::abs(b));
  }
  EXPECT_GT(peak, 0.1f);
  EXPECT_LE(max_difference, 1e-6f * peak);
}

TEST_F(ObservabilityTest, LogIsOneJsonObjectALineWithEveryStateChangeOfAJob) {
  const std::string phantom = MakePhantom("log", 64, 90);
  ProcessResult run = Tomo({"submit", "--spec", phantom + "/job.json", "--data",
                           phantom + "/sinogram.raw", "--wait", "--out", dir() + "/log-result"});
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  absl::StatusOr<std::vector<tomoserve::v1::Job>> jobs = client::TomoClient(server()).ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  const std::string id = jobs->front().id();
  ASSERT_EQ(StopDaemon(), 0);

  std::vector<std::string> states;
  int lines = 0;
  for (const std::string& line : SplitLines(FileBytes(tomod_log()))) {
    if (line.empty()) continue;
    ++lines;
    EXPECT_TRUE(absl::StartsWith(line, "{\"ts\":\"") && absl::EndsWith(line, "}")) << line;
    EXPECT_TRUE(absl::StrContains(line, "\"level\":\"") && absl::StrContains(line, "\"event\":\""))
        << line;
    if (!absl::StrContains(line, "\"event\":\"job_state\"")) continue;
    EXPECT_TRUE(absl::StrContains(line, absl::StrCat("\"job_id\":\"", id, "\""))) << line;
    const size_t to = line.find("\"to\":\"");
    ASSERT_NE(to, std::string::npos) << line;
    states.push_back(line.substr(to + 6, line.find('"', to + 6) - (to + 6)));
  }
  EXPECT_GT(lines, 5);
  EXPECT_THAT(states, ElementsAre("uploading", "queued", "running", "succeeded"));
}

}  // namespace
}  // namespace tomo::testing

// Durable jobs, tested on the real tomod: SIGKILL at random moments while clients submit,
// while jobs run and while results are fetched, then a restart on the same spool. Every
// job a Submit acknowledged must end SUCCEEDED with exactly the bytes `tomo local` makes
// from the same input, or FAILED with a reason; no idempotency key may have two jobs; a
// retried Submit with the same key returns the same id, also after a restart.
//
// The inputs are fresh random sinograms each run (seed printed; TOMO_TEST_SEED replays
// the data, not the kill timing). tomod runs on the CPU so that its bytes can be compared
// with `tomo local --device cpu`.
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/channel_security.h"
#include "client/job_spec_json.h"
#include "client/tomo_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"
#include "tests/end_to_end/daemon_fixture.h"
#include "tests/server/security/test_certificates.h"

namespace tomo::testing {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A job input: its spec, a random sinogram, and the result `tomo local` computes from it.
struct Input {
  v1::JobSpec spec;
  std::string data_path;
  std::string reference;
};

// Errors a call may see when tomod dies under it or is not up yet.
bool IsCrashError(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsCancelled(status) || absl::IsUnknown(status) ||
         absl::IsDeadlineExceeded(status) || absl::IsInternal(status);
}

class CrashRestartTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    if (HasFatalFailure()) return;
    seed_ = TestSeed();
    random_.seed(seed_);
    ASSERT_EQ(StopDaemon(), 0);
    SetUpSecurity();
    if (HasFatalFailure()) return;
    Restart();
  }

  // For the variant with TLS and tokens: sets security_flags_ and client_options_.
  virtual void SetUpSecurity() {}

  // The body of SigkillWhileSubmittingRunningAndFetchingLosesNothing (and its variant).
  void SubmitRunAndFetchThroughKills();

  // tomod on the CPU (whose bytes `tomo local --device cpu` reproduces) on the same spool.
  void Restart(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags = {"--devices=cpu"};
    flags.insert(flags.end(), security_flags_.begin(), security_flags_.end());
    flags.insert(flags.end(), extra.begin(), extra.end());
    StartDaemon(flags);
    absl::MutexLock lock(&mu_);
    address_ = server();
  }

  std::string address() {
    absl::MutexLock lock(&mu_);
    return address_;
  }

  Input MakeInput(const std::string& name, int size, int views, bool with_reference = true) {
    Input input;
    const std::string phantom = MakePhantom(name, size, views);
    absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(phantom + "/job.json");
    EXPECT_TRUE(spec.ok()) << spec.status();
    if (!spec.ok()) return input;
    input.spec = *spec;
    std::vector<float> values(input.spec.input().size_bytes() / sizeof(float));
    std::uniform_real_distribution<float> value(0.0f, 4.0f);
    for (float& v : values) v = value(random_);
    input.data_path = phantom + "/random.raw";
    WriteBytes(input.data_path, std::string(reinterpret_cast<const char*>(values.data()),
                                            values.size() * sizeof(float)));
    if (!with_reference) return input;
    const std::string out = phantom + "/reference";
    ProcessResult local = TomoRaw({"local", "--spec", phantom + "/job.json", "--data",
                                   input.data_path, "--out", out, "--device", "cpu"});
    EXPECT_EQ(local.exit_code, 0) << local.Describe();
    input.reference = FileBytes(out + "/volume.raw");
    EXPECT_FALSE(input.reference.empty());
    return input;
  }

  // Submits until tomod acknowledges (retrying with the same key through crashes).
  absl::StatusOr<v1::Job> SubmitUntilAcknowledged(const v1::JobSpec& spec,
                                                  const std::string& data_path,
                                                  absl::Duration timeout = absl::Seconds(60)) {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      client::TomoClient client(address(), client_options_);
      absl::StatusOr<v1::Job> job = client.Submit(spec, {data_path});
      if (job.ok() || !IsCrashError(job.status()) || absl::Now() > deadline) return job;
      ++submit_retries_;
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  // Polls until the job has ended (tomod may be restarting meanwhile).
  absl::StatusOr<v1::Job> WaitUntilEnded(const std::string& id,
                                         absl::Duration timeout = absl::Seconds(60)) {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      absl::StatusOr<v1::Job> job = client::TomoClient(address(), client_options_).GetJob(id);
      if (job.ok() && client::IsFinal(job->state())) return job;
      if (!job.ok() && !IsCrashError(job.status())) return job;
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "job ", id, " has not ended: ",
            job.ok() ? client::JobStateName(job->state()) : std::string(job.status().message())));
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  // tomod's TLS and token flags, and the clients' credentials and token (none by default).
  std::vector<std::string> security_flags_;
  client::ClientOptions client_options_;
  uint64_t seed_ = 0;
  std::mt19937_64 random_;
  std::atomic<int> submit_retries_{0};
  absl::Mutex mu_;
  std::string address_ ABSL_GUARDED_BY(mu_);
};

TEST_F(CrashRestartTest, SigkillWhileSubmittingRunningAndFetchingLosesNothing) {
  SubmitRunAndFetchThroughKills();
}

// The same with TLS and bearer tokens on (two tenants' clients share the work): the crash
// and restart lose nothing, and each job stays its tenant's.
class SecureCrashRestartTest : public CrashRestartTest {
 protected:
  void SetUpSecurity() override {
    const std::string certs = dir() + "/certs";
    absl::Status made = MakeDevCertificates(certs);
    ASSERT_TRUE(made.ok()) << made;
    std::mt19937_64 random(std::random_device{}());
    std::uniform_int_distribution<int> hex(0, 15);
    for (int i = 0; i < 40; ++i) token_ += "0123456789abcdef"[hex(random)];
    const std::string tokens = dir() + "/tokens";
    WriteBytes(tokens, absl::StrCat(token_, " lab-a user\n"));
    ASSERT_EQ(chmod(tokens.c_str(), 0600), 0);
    security_flags_ = {"--tls_cert_file=" + certs + "/server.crt",
                       "--tls_key_file=" + certs + "/server.key", "--tokens_file=" + tokens};
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        client::MakeChannelCredentials({certs + "/ca.crt", "", ""});
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    client_options_.credentials = *credentials;
    client_options_.bearer_token = token_;
  }
  void TearDown() override {
    std::string logs;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(dir(), error)) {
      if (entry.path().filename().string().rfind("tomod.log", 0) == 0) {
        logs += ReadFileOrEmpty(entry.path().string());
      }
    }
    EXPECT_THAT(logs, ::testing::Not(HasSubstr(token_))) << "the token is in tomod's log";
    CrashRestartTest::TearDown();
  }
  std::string token_;
};

TEST_F(SecureCrashRestartTest, SigkillWithTlsAndTokensLosesNothing) {
  SubmitRunAndFetchThroughKills();
  // Without the token, nothing is seen.
  client::ClientOptions no_token = client_options_;
  no_token.bearer_token.clear();
  EXPECT_EQ(client::TomoClient(address(), no_token).ListJobs().status().code(),
            absl::StatusCode::kUnauthenticated);
}

void CrashRestartTest::SubmitRunAndFetchThroughKills() {
  SCOPED_TRACE(SeedTrace(seed_));
  const std::vector<Input> inputs = {MakeInput("small", 64, 90), MakeInput("medium", 320, 480)};
  ASSERT_FALSE(HasFailure());

  constexpr int kClients = 3;
  constexpr int kJobsPerClient = 8;
  struct Acknowledged {
    std::string key;
    std::string id;
    size_t input;
  };
  absl::Mutex acked_mu;
  std::vector<Acknowledged> acked;
  std::atomic<int> submitters_left{kClients};
  std::atomic<int> fetches_ok{0};
  std::vector<std::string> errors;  // guarded by acked_mu

  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    const uint64_t client_seed = random_();
    clients.emplace_back([&, c, client_seed] {
      std::mt19937_64 random(client_seed);
      for (int j = 0; j < kJobsPerClient; ++j) {
        const size_t which = random() % inputs.size();
        v1::JobSpec spec = inputs[which].spec;
        spec.set_name(absl::StrCat("client ", c, " job ", j));
        spec.set_idempotency_key(absl::StrCat("crash-", client_seed, "-", j));
        absl::StatusOr<v1::Job> job = SubmitUntilAcknowledged(spec, inputs[which].data_path);
        absl::MutexLock lock(&acked_mu);
        if (!job.ok()) {
          errors.push_back(absl::StrCat(spec.idempotency_key(), ": ", job.status().ToString()));
          continue;
        }
        acked.push_back({spec.idempotency_key(), job->id(), which});
        absl::SleepFor(absl::Milliseconds(random() % 50));
      }
      --submitters_left;
    });
  }
  // Fetches finished results over and over while tomod is killed under it; a fetch that
  // a crash breaks resumes from its partial file on the next try.
  std::atomic<bool> stop_fetching{false};
  std::thread fetcher;
  // Stops and joins the fetcher also when an ASSERT returns early.
  struct StopFetcher {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~StopFetcher() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } stop_fetcher{stop_fetching, fetcher};
  fetcher = std::thread([&] {
    while (!stop_fetching.load()) {
      std::vector<Acknowledged> snapshot;
      {
        absl::MutexLock lock(&acked_mu);
        snapshot = acked;
      }
      client::TomoClient client(address(), client_options_);
      for (const Acknowledged& job : snapshot) {
        if (stop_fetching.load()) break;
        const std::string out = absl::StrCat(dir(), "/fetched-", job.id);
        absl::StatusOr<v1::ResultFile> file = client.Fetch(job.id, "", out, /*resume=*/true);
        if (!file.ok()) continue;  // not finished yet, or tomod is down: next round
        if (FileBytes(out) != inputs[job.input].reference) {
          absl::MutexLock lock(&acked_mu);
          errors.push_back(absl::StrCat("fetched result of ", job.id, " is not the reference"));
        }
        ++fetches_ok;
        fs::remove(out);
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  });

  // Kill at random moments: while the clients submit, and on until at least four kills
  // and one interrupted run (a job queued again with attempts, or run twice) were seen,
  // as long as some job is still unfinished.
  std::mt19937_64& random = random_;
  int kills = 0;
  bool interrupted_run = false;
  bool unfinished = true;
  while (kills < 15) {
    if (submitters_left.load() == 0 && kills >= 4 && (interrupted_run || !unfinished)) break;
    absl::SleepFor(absl::Milliseconds(kills == 0 ? 30 + random() % 120 : 50 + random() % 350));
    KillDaemon();
    ++kills;
    Restart();
    if (HasFatalFailure()) break;
    absl::StatusOr<std::vector<v1::Job>> jobs = client::TomoClient(address(), client_options_).ListJobs();
    if (!jobs.ok()) continue;
    unfinished = false;
    for (const v1::Job& job : *jobs) {
      unfinished |= !client::IsFinal(job.state());
      interrupted_run |=
          job.attempts() >= 2 || (job.state() == v1::JOB_STATE_QUEUED && job.attempts() >= 1);
    }
  }
  for (std::thread& t : clients) t.join();
  ASSERT_FALSE(HasFatalFailure());

  // Every acknowledged job ends, with the reference bytes or a reason.
  client::TomoClient client(address(), client_options_);
  std::set<std::string> ids;
  int succeeded = 0, failed = 0;
  for (const Acknowledged& job : acked) {
    ids.insert(job.id);
    absl::StatusOr<v1::Job> ended = WaitUntilEnded(job.id);
    ASSERT_TRUE(ended.ok()) << ended.status();
    if (ended->state() == v1::JOB_STATE_SUCCEEDED) {
      ++succeeded;
      const std::string out = absl::StrCat(dir(), "/final-", job.id);
      absl::StatusOr<v1::ResultFile> file = client.Fetch(job.id, "", out, /*resume=*/false);
      ASSERT_TRUE(file.ok()) << file.status();
      EXPECT_EQ(FileBytes(out), inputs[job.input].reference) << "job " << job.id;
      fs::remove(out);
    } else {
      ++failed;
      EXPECT_EQ(ended->state(), v1::JOB_STATE_FAILED) << job.id;
      // Valid inputs fail only when every run was interrupted.
      EXPECT_THAT(ended->error(), HasSubstr("--max_attempts")) << job.id;
    }
  }
  stop_fetching = true;
  fetcher.join();
  {
    absl::MutexLock lock(&acked_mu);
    for (const std::string& error : errors) ADD_FAILURE() << error;
  }
  EXPECT_EQ(acked.size(), static_cast<size_t>(kClients * kJobsPerClient));
  EXPECT_EQ(ids.size(), acked.size()) << "two keys were answered with one job";

  // No duplicates: one job per key, and nothing but the acknowledged jobs.
  absl::StatusOr<std::vector<v1::Job>> listed = client.ListJobs();
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::map<std::string, int> per_key;
  for (const v1::Job& job : *listed) ++per_key[job.spec().idempotency_key()];
  EXPECT_EQ(listed->size(), acked.size());
  for (const Acknowledged& job : acked) EXPECT_EQ(per_key[job.key], 1) << job.key;
  std::vector<std::string> dirs = JobDirs(spool_dir());
  for (const absl::Time deadline = absl::Now() + absl::Seconds(5);
       std::set<std::string>(dirs.begin(), dirs.end()) != ids && absl::Now() < deadline;
       dirs = JobDirs(spool_dir())) {
    absl::SleepFor(absl::Milliseconds(20));  // an aborted upload's files go after its record
  }
  EXPECT_EQ(std::set<std::string>(dirs.begin(), dirs.end()), ids)
      << "the spool holds job directories without a job, or lacks some";

  // A retried Submit with the same key, after all those restarts, is the same job.
  for (size_t i = 0; i < acked.size(); i += 3) {
    v1::JobSpec spec = inputs[acked[i].input].spec;
    for (const v1::Job& job : *listed) {
      if (job.id() == acked[i].id) spec = job.spec();
    }
    absl::StatusOr<v1::Job> again = client.Submit(spec, {inputs[acked[i].input].data_path});
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->id(), acked[i].id);
  }
  EXPECT_EQ(client.ListJobs()->size(), acked.size());
  std::cout << kills << " kills, " << submit_retries_.load() << " Submits retried, "
            << (interrupted_run ? "" : "no ") << "interrupted run seen; " << acked.size()
            << " jobs: " << succeeded << " succeeded, " << failed
            << " failed after every run was interrupted; " << fetches_ok.load()
            << " fetches during the crashes\n";
}

TEST_F(CrashRestartTest, InterruptedRunsAreRetriedThenFailWithTheReason) {
  SCOPED_TRACE(SeedTrace(seed_));
  ASSERT_EQ(StopDaemon(), 0);
  Restart({"--max_attempts=2"});
  // Long enough on the CPU to be caught running (it is killed, never waited for).
  const Input big = MakeInput("big", 768, 1080, /*with_reference=*/false);
  ASSERT_FALSE(HasFailure());
  v1::JobSpec spec = big.spec;
  spec.set_idempotency_key(absl::StrCat("attempts-", random_()));
  absl::StatusOr<v1::Job> job = SubmitUntilAcknowledged(spec, big.data_path);
  ASSERT_TRUE(job.ok()) << job.status();

  auto wait_running = [&](uint32_t attempts) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    for (;;) {
      absl::StatusOr<v1::Job> now = client::TomoClient(address(), client_options_).GetJob(job->id());
      ASSERT_TRUE(now.ok()) << now.status();
      if (now->state() == v1::JOB_STATE_RUNNING) {
        EXPECT_EQ(now->attempts(), attempts);
        return;
      }
      ASSERT_EQ(now->state(), v1::JOB_STATE_QUEUED) << now->error();
      ASSERT_LT(absl::Now(), deadline) << "the job did not start";
      absl::SleepFor(absl::Milliseconds(5));
    }
  };
  wait_running(1);
  KillDaemon();
  Restart({"--max_attempts=2"});
  wait_running(2);
  KillDaemon();
  Restart({"--max_attempts=2"});
  absl::StatusOr<v1::Job> ended = client::TomoClient(address(), client_options_).GetJob(job->id());
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(ended->attempts(), 2u);
  EXPECT_THAT(ended->error(),
              AllOf(HasSubstr("each of the job's 2 runs"), HasSubstr("--max_attempts is 2")));
  // The key still names it: a retry does not start the job again.
  absl::StatusOr<v1::Job> again = SubmitUntilAcknowledged(spec, big.data_path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id(), job->id());
  EXPECT_EQ(again->state(), v1::JOB_STATE_FAILED);
}

TEST_F(CrashRestartTest, IdempotencyKeyOnTheCommandLine) {
  const Input small = MakeInput("cli", 64, 90);
  ASSERT_FALSE(HasFailure());
  const std::string spec_path = dir() + "/cli/job.json";
  const std::string key = absl::StrCat("cli-", random_());
  auto submit = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"submit", "--spec", spec_path, "--data", small.data_path};
    args.insert(args.end(), extra.begin(), extra.end());
    ProcessResult r = Tomo(args);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return r.OutLines().empty() ? std::string() : r.OutLines().back();
  };
  const std::string first = submit({"--idempotency-key", key});
  KillDaemon();
  Restart();
  EXPECT_EQ(submit({"--idempotency-key", key}), first);
  // Without the flag each invocation is a new job.
  const std::string a = submit({});
  const std::string b = submit({});
  EXPECT_NE(a, b);
  EXPECT_NE(a, first);
  ProcessResult too_long = Tomo({"submit", "--spec", spec_path, "--data", small.data_path,
                                 "--idempotency-key", std::string(300, 'k')});
  EXPECT_NE(too_long.exit_code, 0);
  EXPECT_THAT(too_long.err,
              AllOf(HasSubstr("idempotency_key"), HasSubstr("300"), HasSubstr("256")));
}

TEST_F(CrashRestartTest, AKnownKeyIsAnsweredBeforeTheData) {
  const Input small = MakeInput("early", 64, 90, /*with_reference=*/false);
  ASSERT_FALSE(HasFailure());
  v1::JobSpec spec = small.spec;
  spec.set_idempotency_key(absl::StrCat("early-", random_()));
  absl::StatusOr<v1::Job> job = SubmitUntilAcknowledged(spec, small.data_path);
  ASSERT_TRUE(job.ok()) << job.status();
  // The raw stream: the spec alone, no data and no upload_end, is answered with the job.
  auto channel = client::MakeChannel(address(), client::ClientOptions{});
  auto stub = v1::Reconstruction::NewStub(channel);
  grpc::ClientContext context;
  v1::SubmitResponse response;
  auto writer = stub->Submit(&context, &response);
  v1::SubmitRequest request;
  *request.mutable_spec() = spec;
  writer->Write(request);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.job().id(), job->id());
  // A different spec under the same key is refused, naming the key and the job.
  spec.set_priority(spec.priority() + 1);
  absl::StatusOr<v1::Job> reused = client::TomoClient(address(), client_options_).Submit(spec, {small.data_path});
  EXPECT_EQ(reused.status().code(), absl::StatusCode::kAlreadyExists) << reused.status();
  EXPECT_THAT(reused.status().message(),
              AllOf(HasSubstr(spec.idempotency_key()), HasSubstr(job->id())));
}

TEST_F(CrashRestartTest, RetentionAndSpoolLimitAreEnforcedAndReported) {
  const Input small = MakeInput("limits", 64, 180);
  ASSERT_FALSE(HasFailure());
  const uint64_t input = small.spec.input().size_bytes();
  // Admission reserves a job's input and the bound of its raw result (4 bytes a voxel and
  // 64 KiB for the sidecar, runner/disk_space.h) until it ends: room for two such jobs at
  // once, and, once they have ended (their real results being smaller than the bound), not
  // for a third.
  const uint64_t reserved = input + 64 * 64 * 4 + (64 << 10);
  const uint64_t limit = 2 * reserved + input / 8;
  ASSERT_EQ(StopDaemon(), 0);
  Restart({"--result_ttl=2s", absl::StrCat("--max_spool_bytes=", limit)});
  client::TomoClient client(address(), client_options_);
  absl::StatusOr<v1::ServerInfo> info = client.GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->limits().max_spool_bytes(), limit);
  EXPECT_EQ(info->limits().result_ttl().seconds(), 2);
  EXPECT_EQ(info->limits().max_attempts(), 3u);
  EXPECT_EQ(info->spool_used_bytes(), 0u);

  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<v1::Job> job = client.Submit(small.spec, {small.data_path});
    ASSERT_TRUE(job.ok()) << job.status();
    ids.push_back(job->id());
  }
  for (const std::string& id : ids) {
    absl::StatusOr<v1::Job> ended = WaitUntilEnded(id, absl::Seconds(20));
    ASSERT_TRUE(ended.ok()) << ended.status();
  }
  absl::StatusOr<v1::Job> refused = client.Submit(small.spec, {small.data_path});
  // Unless the first jobs have expired already (a very slow machine).
  if (!refused.ok()) {
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
    EXPECT_THAT(refused.status().message(),
                AllOf(HasSubstr("--max_spool_bytes"), HasSubstr(absl::StrCat(limit))));
  }
  // After the TTL the finished jobs are gone, files and all, and there is room again.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (client.ListJobs()->size() > (refused.ok() ? 1u : 0u) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  for (const std::string& id : ids) {
    EXPECT_EQ(client.GetJob(id).status().code(), absl::StatusCode::kNotFound);
    // The files go right after the record.
    while (fs::exists(spool_dir() + "/jobs/" + id) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    EXPECT_FALSE(fs::exists(spool_dir() + "/jobs/" + id));
  }
  absl::StatusOr<v1::Job> later = client.Submit(small.spec, {small.data_path});
  EXPECT_TRUE(later.ok()) << later.status();
}

}  // namespace
}  // namespace tomo::testing

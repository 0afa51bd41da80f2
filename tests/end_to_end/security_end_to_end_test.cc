// TLS, mutual TLS, bearer tokens and tenants, tested on the real tomod and tomo over
// loopback: certificates from scripts/dev-certs (a CA, the server, clients lab-a and
// lab-b), one of another CA and an expired one signed by the right CA; a tokens file of
// fresh random tokens (lab-a and lab-b users, an ops admin).
//
// Every test ends by checking that no token appears in tomod's log (its refusals, reloads
// and job lines included).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "client/channel_security.h"
#include "client/job_spec_json.h"
#include "client/tomo_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/end_to_end/daemon_fixture.h"
#include "tests/server/http_get.h"
#include "tests/server/security/test_certificates.h"

namespace tomo::testing {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string RandomToken(std::mt19937_64& random) {
  std::uniform_int_distribution<int> hex(0, 15);
  std::string token;
  for (int i = 0; i < 40; ++i) token += "0123456789abcdef"[hex(random)];
  return token;
}

// One request of raw bytes to method, one response back (a unary call; a streaming method
// gets one message and the end of the client's side).
absl::StatusOr<std::string> RawCall(const std::shared_ptr<grpc::Channel>& channel,
                                    const std::string& method, const std::string& bytes_out) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::ByteBuffer request, response;
  grpc::Slice out(bytes_out.data(), bytes_out.size());
  request = grpc::ByteBuffer(&out, 1);
  std::mutex mu;
  std::condition_variable done;
  bool finished = false;
  grpc::Status status;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request,
                 &response, [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = std::move(s);
                   finished = true;
                   done.notify_all();
                 });
  std::unique_lock<std::mutex> lock(mu);
  done.wait(lock, [&] { return finished; });
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::DataLossError("unreadable response");
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes += std::string(s.begin(), s.end());
  return bytes;
}

// The health service's Check for the whole server ("" service): SERVING is "\x08\x01".
absl::StatusOr<std::string> HealthCheck(const std::shared_ptr<grpc::Channel>& channel) {
  return RawCall(channel, "/grpc.health.v1.Health/Check", "");
}

// Server reflection's list of services: a ServerReflectionRequest whose list_services
// (field 7) is "*".
absl::StatusOr<std::string> ReflectionListServices(const std::shared_ptr<grpc::Channel>& channel) {
  return RawCall(channel, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                 std::string("\x3a\x01*", 3));
}

class SecurityTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(StopDaemon(), 0);
    certs_ = dir() + "/certs";
    absl::Status made = MakeDevCertificates(certs_, "lab-a");
    ASSERT_TRUE(made.ok()) << made;
    made = MakeDevCertificates(certs_, "lab-b");  // the same CA
    ASSERT_TRUE(made.ok()) << made;
    made = MakeExpiredCertificate(certs_, "old");
    ASSERT_TRUE(made.ok()) << made;
    made = MakeDevCertificates(dir() + "/other", "lab-a");  // another CA
    ASSERT_TRUE(made.ok()) << made;
    std::mt19937_64 random(std::random_device{}());
    lab_a_ = RandomToken(random);
    lab_b_ = RandomToken(random);
    admin_ = RandomToken(random);
    spare_ = RandomToken(random);
    WriteTokens(absl::StrCat("# tokens of this test\n", lab_a_, " lab-a user\n", lab_b_,
                             " lab-b user\n\n", admin_, " ops admin\n"));
    Start({});
  }

  void TearDown() override {
    // Secrets never reach the log.
    std::string logs;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(dir(), error)) {
      if (entry.path().filename().string().rfind("tomod.log", 0) == 0) {
        logs += ReadFileOrEmpty(entry.path().string());
      }
    }
    for (const std::string& token : {lab_a_, lab_b_, admin_, spare_}) {
      if (!token.empty()) EXPECT_THAT(logs, Not(HasSubstr(token))) << "a token is in the log";
    }
    DaemonTest::TearDown();
  }

  void WriteTokens(const std::string& text, mode_t mode = 0600) {
    const std::string next = tokens_file() + ".next";
    WriteBytes(next, text);
    ASSERT_EQ(chmod(next.c_str(), mode), 0);
    fs::rename(next, tokens_file());
  }
  std::string tokens_file() const { return dir() + "/tokens"; }
  std::string Cert(const std::string& name) const { return certs_ + "/" + name; }

  // tomod with TLS (server.crt), the tokens file and extra flags; mutual TLS when
  // extra asks for it.
  void Start(const std::vector<std::string>& extra) {
    std::vector<std::string> flags = {"--devices=cpu", "--tls_cert_file=" + Cert("server.crt"),
                                      "--tls_key_file=" + Cert("server.key"),
                                      "--tokens_file=" + tokens_file()};
    flags.insert(flags.end(), extra.begin(), extra.end());
    StartDaemon(flags);
  }
  void StartMutual(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags = {"--tls_client_ca_file=" + Cert("ca.crt")};
    flags.insert(flags.end(), extra.begin(), extra.end());
    Start(flags);
  }

  // Options trusting ca (default: the right CA), with a client certificate (name.crt in
  // the directory of ca; empty: none) and a token (empty: none).
  client::ClientOptions Options(const std::string& token, const std::string& cert = "",
                                std::string ca = "") {
    if (ca.empty()) ca = Cert("ca.crt");
    const std::string ca_dir = fs::path(ca).parent_path().string();
    client::ClientTlsFiles files{ca, "", ""};
    if (!cert.empty()) {
      files.cert_file = absl::StrCat(ca_dir, "/", cert, ".crt");
      files.key_file = absl::StrCat(ca_dir, "/", cert, ".key");
    }
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        client::MakeChannelCredentials(files);
    EXPECT_TRUE(credentials.ok()) << credentials.status();
    client::ClientOptions options;
    if (credentials.ok()) options.credentials = *credentials;
    options.bearer_token = token;
    options.unary_timeout = absl::Seconds(20);
    return options;
  }
  client::TomoClient Client(const std::string& token, const std::string& cert = "") {
    return client::TomoClient(server(), Options(token, cert));
  }

  // A small job's spec and data (a phantom case made once per test).
  std::pair<v1::JobSpec, std::string> SmallJob() {
    if (phantom_.empty()) phantom_ = MakePhantom("small", 16, 24);
    absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(phantom_ + "/job.json");
    EXPECT_TRUE(spec.ok()) << spec.status();
    return {spec.ok() ? *spec : v1::JobSpec(), phantom_ + "/sinogram.raw"};
  }

  absl::StatusOr<v1::Job> WaitEnded(client::TomoClient& client, const std::string& id) {
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    for (;;) {
      absl::StatusOr<v1::Job> job = client.GetJob(id);
      if (!job.ok() || client::IsFinal(job->state())) return job;
      if (absl::Now() > deadline) return absl::DeadlineExceededError("the job did not end");
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  std::string certs_;
  std::string phantom_;
  std::string lab_a_, lab_b_, admin_, spare_;
};

// Whether this machine has IPv6 loopback (some containers have none).
bool HasIpv6Loopback() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return bound;
}

bool Contains(const std::vector<v1::Job>& jobs, const std::string& id) {
  for (const v1::Job& job : jobs) {
    if (job.id() == id) return true;
  }
  return false;
}

// ------------------------------------------------------------------ TLS and mutual TLS

TEST_F(SecurityTest, TlsNeedsTheRightCaAndRefusesPlainText) {
  absl::StatusOr<v1::ServerInfo> info = Client(lab_a_).GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  // A client that trusts another CA does not accept tomod's certificate.
  absl::StatusOr<v1::ServerInfo> other =
      client::TomoClient(server(), Options(lab_a_, "", dir() + "/other/ca.crt")).GetServerInfo();
  EXPECT_EQ(other.status().code(), absl::StatusCode::kUnavailable) << other.status();
  // Plain text gets no answer from a TLS port.
  client::ClientOptions plain;
  plain.bearer_token = lab_a_;
  plain.unary_timeout = absl::Seconds(20);
  absl::StatusOr<v1::ServerInfo> refused = client::TomoClient(server(), plain).GetServerInfo();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();

  // The CLI: flags, then the environment.
  ProcessResult r = Tomo({"--tls-ca", Cert("ca.crt"), "info"}, kTomoTimeout,
                         {"TOMO_TOKEN=" + lab_a_});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  const std::string token_file = dir() + "/lab-a.token";
  WriteBytes(token_file, lab_a_ + "\n");
  r = Tomo({"list"}, kTomoTimeout, {"TOMO_TLS_CA=" + Cert("ca.crt"), "TOMO_TOKEN_FILE=" + token_file});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  r = Tomo({"--tls-ca", Cert("ca.crt"), "--token-file", token_file, "list"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  r = Tomo({"info"}, kTomoTimeout, {"TOMO_TOKEN=" + lab_a_});
  EXPECT_EQ(r.exit_code, 6) << r.Describe();  // plain text: unreachable
  EXPECT_TRUE(OneErrorLine(r));
}

TEST_F(SecurityTest, MutualTlsNeedsAClientCertificateOfTheCaWithinItsDates) {
  ASSERT_EQ(StopDaemon(), 0);
  StartMutual();
  absl::StatusOr<v1::ServerInfo> info = Client(lab_a_, "lab-a").GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  // No certificate, one of another CA, an expired one of the right CA: no handshake.
  const std::vector<std::pair<std::string, client::ClientOptions>> refused = {
      {"no certificate", Options(lab_a_)},
      {"another CA's certificate", Options(lab_a_, "lab-a", dir() + "/other/ca.crt")},
      {"an expired certificate", Options(lab_a_, "old")},
  };
  for (const auto& [what, options] : refused) {
    client::ClientOptions trusting = options;
    if (what == "another CA's certificate") {
      // Trust the right server CA, present the other CA's client certificate.
      absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
          client::MakeChannelCredentials({Cert("ca.crt"), dir() + "/other/lab-a.crt",
                                          dir() + "/other/lab-a.key"});
      ASSERT_TRUE(credentials.ok()) << credentials.status();
      trusting.credentials = *credentials;
    }
    absl::StatusOr<v1::ServerInfo> answer = client::TomoClient(server(), trusting).GetServerInfo();
    EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable) << what << ": "
                                                                       << answer.status();
  }
  // The CLI with the certificate from the environment.
  ProcessResult r = Tomo({"info"}, kTomoTimeout,
                         {"TOMO_TLS_CA=" + Cert("ca.crt"), "TOMO_TLS_CERT=" + Cert("lab-b.crt"),
                          "TOMO_TLS_KEY=" + Cert("lab-b.key"), "TOMO_TOKEN=" + lab_b_});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
}

// Without a token, the certificate's CN is the tenant; a token, when sent, wins.
TEST_F(SecurityTest, TheClientCertificateNamesTheTenantWhenNoTokenIsSent) {
  ASSERT_EQ(StopDaemon(), 0);
  StartMutual();
  auto [spec, data] = SmallJob();
  client::TomoClient by_cert = Client("", "lab-a");
  absl::StatusOr<v1::Job> job = by_cert.Submit(spec, {data});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->tenant(), "lab-a");
  EXPECT_EQ(job->client(), "lab-a");
  // The lab-a token on lab-b's certificate is lab-a; lab-b's certificate alone is not.
  EXPECT_TRUE(Client(lab_a_, "lab-b").GetJob(job->id()).ok());
  EXPECT_EQ(Client("", "lab-b").GetJob(job->id()).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SecurityTest, AnExpiredServerCertificateOrAWrongKeyIsRefusedAtStart) {
  ASSERT_EQ(StopDaemon(), 0);
  ProcessResult r = RunProcess(
      {BinaryPath("tomod", TOMOD_BINARY), "--listen=127.0.0.1:0", "--spool_dir=" + spool_dir(),
       "--metrics_port=0", "--tls_cert_file=" + Cert("old.crt"), "--tls_key_file=" + Cert("old.key")},
      dir(), absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("has expired"));
  r = RunProcess({BinaryPath("tomod", TOMOD_BINARY), "--listen=127.0.0.1:0",
                  "--spool_dir=" + spool_dir(), "--metrics_port=0",
                  "--tls_cert_file=" + Cert("server.crt"), "--tls_key_file=" + Cert("lab-a.key")},
                 dir(), absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("is not the key of the certificate"));
  Start({});
}

// ------------------------------------------------------------------ tokens

TEST_F(SecurityTest, AMissingOrWrongTokenIsUnauthenticatedAndHealthNeedsNone) {
  auto [spec, data] = SmallJob();
  absl::StatusOr<v1::Job> job = Client(lab_a_).Submit(spec, {data});
  ASSERT_TRUE(job.ok()) << job.status();
  for (const std::string& token : {std::string(), spare_, lab_a_.substr(1), lab_a_ + "0"}) {
    SCOPED_TRACE(token.empty() ? "no token" : "a wrong token");
    client::TomoClient client = Client(token);
    std::vector<absl::Status> statuses = {
        client.GetServerInfo().status(), client.ListJobs().status(),
        client.GetJob(job->id()).status(), client.Cancel(job->id()).status(),
        client.Delete(job->id()),
        client.Watch(job->id(), [](const v1::JobEvent&) {}),
        client.Fetch(job->id(), "", dir() + "/never.raw", false).status(),
        client.Submit(spec, {data}).status()};
    for (const absl::Status& status : statuses) {
      EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << status;
      if (!token.empty()) EXPECT_THAT(status.message(), Not(HasSubstr(token)));
    }
  }
  // The CLI names the refusal on one line, without the token.
  ProcessResult r = Tomo({"--tls-ca", Cert("ca.crt"), "list"}, kTomoTimeout,
                         {"TOMO_TOKEN=" + spare_});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(OneErrorLine(r));
  EXPECT_THAT(r.err, HasSubstr("not valid"));
  EXPECT_THAT(r.err, Not(HasSubstr(spare_)));
  // The health service answers without a token.
  absl::StatusOr<std::string> health = HealthCheck(client::MakeChannel(server(), Options("")));
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, std::string("\x08\x01", 2));
  // The refusals are logged, naming the reason.
  EXPECT_THAT(ReadFileOrEmpty(tomod_log()), HasSubstr("\"event\":\"unauthenticated\""));
}

// A client that repeats a refused call does not flood the log: at most 20 "unauthenticated"
// lines per 10 s (server/security/authenticator.h), and the first line after that says how
// many were left out.
TEST_F(SecurityTest, RefusalsAreLoggedAtMost20Per10SecondsAndTheRestCounted) {
  ASSERT_EQ(StopDaemon(), 0);
  StartDaemon({"--devices=cpu", "--tokens_file=" + tokens_file()});
  const auto refusal_lines = [this] {
    std::vector<std::string> lines;
    for (const std::string& line : SplitLines(ReadFileOrEmpty(tomod_log()))) {
      if (absl::StrContains(line, "\"event\":\"unauthenticated\"")) lines.push_back(line);
    }
    return lines;
  };
  client::ClientOptions plain;
  plain.bearer_token = spare_ + "0";  // no such token
  client::TomoClient client(server(), plain);
  const absl::Time start = absl::Now();
  constexpr int kCalls = 150;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_EQ(client.ListJobs().status().code(), absl::StatusCode::kUnauthenticated) << i;
  }
  const absl::Duration took = absl::Now() - start;
  if (took >= absl::Seconds(9)) GTEST_SKIP() << kCalls << " calls took " << took;
  std::vector<std::string> lines = refusal_lines();
  EXPECT_EQ(lines.size(), 20u);
  for (const std::string& line : lines) EXPECT_THAT(line, Not(HasSubstr("suppressed")));
  absl::SleepFor(absl::Seconds(10) - (absl::Now() - start) + absl::Seconds(1));
  ASSERT_EQ(client.ListJobs().status().code(), absl::StatusCode::kUnauthenticated);
  lines = refusal_lines();
  ASSERT_EQ(lines.size(), 21u);
  EXPECT_THAT(lines.back(), HasSubstr(absl::StrCat("\"suppressed\":", kCalls - 20)));
  EXPECT_THAT(ReadFileOrEmpty(tomod_log()), Not(HasSubstr(spare_)));
}

// Tokens need no TLS on loopback: the metadata goes on a plain-text channel too.
TEST_F(SecurityTest, TokensWorkOverPlainTextOnLoopback) {
  ASSERT_EQ(StopDaemon(), 0);
  StartDaemon({"--devices=cpu", "--tokens_file=" + tokens_file()});
  client::ClientOptions plain;
  plain.bearer_token = lab_a_;
  auto [spec, data] = SmallJob();
  absl::StatusOr<v1::Job> job = client::TomoClient(server(), plain).Submit(spec, {data});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->tenant(), "lab-a");
  plain.bearer_token.clear();
  EXPECT_EQ(client::TomoClient(server(), plain).ListJobs().status().code(),
            absl::StatusCode::kUnauthenticated);
  ProcessResult r = Tomo({"status", job->id()}, kTomoTimeout, {"TOMO_TOKEN=" + lab_a_});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  r = Tomo({"status", job->id()}, kTomoTimeout, {"TOMO_TOKEN=" + lab_b_});
  EXPECT_EQ(r.exit_code, 4) << r.Describe();
}

// Reflection cannot ask for a token, so a tomod with tokens does not serve it; without
// authentication it does.
TEST_F(SecurityTest, ReflectionIsServedOnlyWithoutAuthentication) {
  absl::StatusOr<std::string> services =
      ReflectionListServices(client::MakeChannel(server(), Options(lab_a_)));
  EXPECT_EQ(services.status().code(), absl::StatusCode::kUnimplemented) << services.status();
  ASSERT_EQ(StopDaemon(), 0);
  StartDaemon({"--devices=cpu"});
  services = ReflectionListServices(client::MakeChannel(server(), client::ClientOptions{}));
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, HasSubstr("tomoserve.v1.Reconstruction"));
}

TEST_F(SecurityTest, SighupReloadsTheTokensAndABadFileKeepsThemInForce) {
  ASSERT_TRUE(Client(lab_b_).ListJobs().ok());
  // Revoke lab-b, add the spare token for lab-b.
  WriteTokens(absl::StrCat(lab_a_, " lab-a user\n", spare_, " lab-b user\n", admin_,
                           " ops admin\n"));
  SignalDaemon(SIGHUP);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (Client(lab_b_).ListJobs().ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(Client(lab_b_).ListJobs().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(Client(spare_).ListJobs().ok());
  // A broken file and one others may read: the tokens in force stay.
  for (const auto& [text, mode] :
       std::vector<std::pair<std::string, mode_t>>{
           {absl::StrCat(lab_b_, " lab-b superuser\n"), 0600},
           {absl::StrCat(lab_b_, " lab-b user\n"), 0644}}) {
    const size_t lines_before = SplitLines(ReadFileOrEmpty(tomod_log())).size();
    WriteTokens(text, mode);
    SignalDaemon(SIGHUP);
    const absl::Time until = absl::Now() + absl::Seconds(20);
    while (SplitLines(ReadFileOrEmpty(tomod_log())).size() == lines_before &&
           absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_THAT(ReadFileOrEmpty(tomod_log()), HasSubstr("tokens not reloaded"));
    EXPECT_TRUE(Client(spare_).ListJobs().ok());
    EXPECT_TRUE(Client(lab_a_).ListJobs().ok());
    EXPECT_EQ(Client(lab_b_).ListJobs().status().code(), absl::StatusCode::kUnauthenticated);
  }
  EXPECT_THAT(ReadFileOrEmpty(tomod_log()), HasSubstr("mode 0644"));
}

// SIGHUP reads the TLS files again: a certificate of another CA replaces the first for new
// connections; a key that is not the certificate's keeps the one in force.
TEST_F(SecurityTest, SighupReloadsTheTlsCertificateAndABadOneKeepsItInForce) {
  const std::string other_ca = dir() + "/other/ca.crt";
  const auto lists = [this](const std::string& ca) {
    // A new client: a new channel, so a new handshake.
    return client::TomoClient(server(), Options(lab_a_, "", ca)).ListJobs().status();
  };
  ASSERT_TRUE(lists(Cert("ca.crt")).ok());
  EXPECT_EQ(lists(other_ca).code(), absl::StatusCode::kUnavailable);
  fs::copy_file(Cert("server.key"), Cert("first.key"));
  const auto replace = [this](const std::string& from, const std::string& name) {
    fs::copy_file(from, Cert(name + ".next"), fs::copy_options::overwrite_existing);
    fs::rename(Cert(name + ".next"), Cert(name));
  };
  replace(dir() + "/other/server.crt", "server.crt");
  replace(dir() + "/other/server.key", "server.key");
  SignalDaemon(SIGHUP);
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!lists(other_ca).ok() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(lists(other_ca).ok()) << lists(other_ca);
  EXPECT_EQ(lists(Cert("ca.crt")).code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(ReadFileOrEmpty(tomod_log()), HasSubstr("\"event\":\"tls_reload\""));

  // The first key with the other certificate: refused, the other certificate stays.
  replace(Cert("first.key"), "server.key");
  SignalDaemon(SIGHUP);
  deadline = absl::Now() + absl::Seconds(20);
  while (!absl::StrContains(ReadFileOrEmpty(tomod_log()), "TLS not reloaded") &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(ReadFileOrEmpty(tomod_log()),
              AllOf(HasSubstr("TLS not reloaded"), HasSubstr("is not the key of the certificate")));
  absl::SleepFor(absl::Seconds(2));  // past the watcher's next read
  EXPECT_TRUE(lists(other_ca).ok()) << lists(other_ca);
  // The private copy holds the key unreadable to others.
  struct stat copy {};
  ASSERT_EQ(::stat((spool_dir() + "/tls").c_str(), &copy), 0);
  EXPECT_EQ(copy.st_mode & 0777, 0700u);
}

TEST_F(SecurityTest, ATokensFileOthersMayReadIsRefusedAtStart) {
  ASSERT_EQ(StopDaemon(), 0);
  WriteTokens(absl::StrCat(lab_a_, " lab-a user\n"), 0644);
  ProcessResult r = RunProcess(
      {BinaryPath("tomod", TOMOD_BINARY), "--listen=127.0.0.1:0", "--spool_dir=" + spool_dir(),
       "--metrics_port=0", "--tokens_file=" + tokens_file()},
      dir(), absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("mode 0644"));
  EXPECT_THAT(r.err, Not(HasSubstr(lab_a_)));
  WriteTokens(absl::StrCat(lab_a_, " lab-a user\n"), 0600);
  Start({});
}

// ------------------------------------------------------------------ tenants

TEST_F(SecurityTest, AnotherTenantCannotSeeOrTouchAJobAndTheAdminCan) {
  auto [spec, data] = SmallJob();
  client::TomoClient a = Client(lab_a_), b = Client(lab_b_), admin = Client(admin_);
  absl::StatusOr<v1::Job> job = a.Submit(spec, {data});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->tenant(), "lab-a");
  absl::StatusOr<v1::Job> ended = WaitEnded(a, job->id());
  ASSERT_TRUE(ended.ok()) << ended.status();
  ASSERT_EQ(ended->state(), v1::JOB_STATE_SUCCEEDED) << ended->error();

  // lab-b gets what an unknown id gets, for every call.
  const std::string unknown = "20200101-000000-0000000000000000";
  const absl::Status unknown_status = b.GetJob(unknown).status();
  ASSERT_EQ(unknown_status.code(), absl::StatusCode::kNotFound) << unknown_status;
  auto expect_hidden = [&](const absl::Status& status, const std::string& what) {
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << what << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr("not found")) << what;
  };
  expect_hidden(b.GetJob(job->id()).status(), "get");
  expect_hidden(b.Watch(job->id(), [](const v1::JobEvent&) {}), "watch");
  expect_hidden(b.Fetch(job->id(), "", dir() + "/b.raw", false).status(), "fetch");
  expect_hidden(b.Cancel(job->id()).status(), "cancel");
  expect_hidden(b.Delete(job->id()), "delete");
  absl::StatusOr<std::vector<v1::Job>> listed = b.ListJobs();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_FALSE(Contains(*listed, job->id()));
  ProcessResult r = Tomo({"--tls-ca", Cert("ca.crt"), "status", job->id()}, kTomoTimeout,
                         {"TOMO_TOKEN=" + lab_b_});
  EXPECT_EQ(r.exit_code, 4) << r.Describe();  // not found
  // No byte of the result reached lab-b (the client may leave an empty partial file).
  EXPECT_FALSE(fs::exists(dir() + "/b.raw"));
  EXPECT_EQ(FileBytes(dir() + "/b.raw.partial"), "");

  // lab-a and the admin see it; the admin fetches and deletes it.
  listed = a.ListJobs();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(Contains(*listed, job->id()));
  listed = admin.ListJobs();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(Contains(*listed, job->id()));
  absl::StatusOr<v1::ResultFile> fetched = admin.Fetch(job->id(), "", dir() + "/admin.raw", false);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  int events = 0;
  EXPECT_TRUE(admin.Watch(job->id(), [&](const v1::JobEvent&) { ++events; }).ok());
  EXPECT_GT(events, 0);
  EXPECT_TRUE(admin.Delete(job->id()).ok());
  EXPECT_EQ(a.GetJob(job->id()).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SecurityTest, ACancelOfAnotherTenantsQueuedJobIsNotFoundAndLeavesIt) {
  ASSERT_EQ(StopDaemon(), 0);
  Start({"--devices=cpu"});
  auto [spec, data] = SmallJob();
  // A queue that does not move: a first, larger job on the one worker, the second queued.
  const std::string big = MakePhantom("big", 256, 360);
  absl::StatusOr<v1::JobSpec> big_spec = client::ReadJobSpecFile(big + "/job.json");
  ASSERT_TRUE(big_spec.ok()) << big_spec.status();
  const std::string big_data = big + "/sinogram.raw";
  client::TomoClient a = Client(lab_a_), b = Client(lab_b_);
  absl::StatusOr<v1::Job> first = a.Submit(*big_spec, {big_data});
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<v1::Job> second = a.Submit(spec, {data});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(b.Cancel(second->id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(b.Cancel(first->id()).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<v1::Job> now = a.GetJob(second->id());
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_NE(now->state(), v1::JOB_STATE_CANCELLED);
  // Its owner can.
  absl::StatusOr<v1::Job> cancelled = a.Cancel(first->id());
  EXPECT_TRUE(cancelled.ok()) << cancelled.status();
}

TEST_F(SecurityTest, IdempotencyKeysAreScopedToTheTenantAndSurviveARestart) {
  auto [spec, data] = SmallJob();
  spec.set_idempotency_key("scan-0042");
  absl::StatusOr<v1::Job> a = Client(lab_a_).Submit(spec, {data});
  ASSERT_TRUE(a.ok()) << a.status();
  // lab-b reusing the key gets a job of its own, not lab-a's.
  absl::StatusOr<v1::Job> b = Client(lab_b_).Submit(spec, {data});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(b->id(), a->id());
  EXPECT_EQ(b->tenant(), "lab-b");
  // A different spec under lab-b's key is refused naming the key; lab-a's retry is lab-a's.
  v1::JobSpec changed = spec;
  changed.set_priority(spec.priority() + 1);
  EXPECT_EQ(Client(lab_b_).Submit(changed, {data}).status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_EQ(StopDaemon(), 0);
  Start({});
  absl::StatusOr<v1::Job> again = Client(lab_a_).Submit(spec, {data});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id(), a->id());
  EXPECT_EQ(again->tenant(), "lab-a");
  again = Client(lab_b_).Submit(spec, {data});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id(), b->id());
  // Owners survive the restart.
  EXPECT_EQ(Client(lab_b_).GetJob(a->id()).status().code(), absl::StatusCode::kNotFound);
}

// An upload held open counts as an unfinished job of its tenant.
TEST_F(SecurityTest, QuotasAndThePerClientLimitCountByTenant) {
  ASSERT_EQ(StopDaemon(), 0);
  Start({"--max_jobs_per_client=1", "--tenant_max_spool_bytes=100000000"});
  auto [spec, data] = SmallJob();
  // lab-a's first upload stays open (spec sent, no data yet).
  std::shared_ptr<grpc::Channel> channel = client::MakeChannel(server(), Options(lab_a_));
  std::unique_ptr<v1::Reconstruction::Stub> stub = v1::Reconstruction::NewStub(channel);
  grpc::ClientContext context;
  v1::SubmitResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::SubmitRequest>> writer = stub->Submit(&context, &response);
  v1::SubmitRequest request;
  *request.mutable_spec() = spec;
  ASSERT_TRUE(writer->Write(request));
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  absl::Status second;
  do {
    // A new channel (another connection and port) is the same tenant.
    second = Client(lab_a_).Submit(spec, {data}).status();
  } while (second.ok() && absl::Now() < deadline);
  EXPECT_EQ(second.code(), absl::StatusCode::kResourceExhausted) << second;
  EXPECT_THAT(second.message(), HasSubstr("client lab-a has 1 unfinished jobs"));
  EXPECT_THAT(second.message(), HasSubstr("--max_jobs_per_client"));
  // Another tenant is not held back by lab-a's count.
  absl::StatusOr<v1::Job> other = Client(lab_b_).Submit(spec, {data});
  EXPECT_TRUE(other.ok()) << other.status();
  context.TryCancel();
  writer->Finish().IgnoreError();

  // A spool quota smaller than one job names itself, its value and the limit.
  ASSERT_EQ(StopDaemon(), 0);
  Start({"--tenant_max_spool_bytes=1000", "--tenant_max_unfinished_jobs=5"});
  absl::Status refused = Client(lab_a_).Submit(spec, {data}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("quota tenant_max_spool_bytes: tenant lab-a"));
  EXPECT_THAT(refused.message(), HasSubstr("over the limit of 1000 (--tenant_max_spool_bytes)"));
  absl::StatusOr<v1::ServerInfo> info = Client(lab_a_).GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->limits().tenant_max_spool_bytes(), 1000u);
  EXPECT_EQ(info->limits().tenant_max_unfinished_jobs(), 5u);
}

TEST_F(SecurityTest, UnfinishedJobQuotaPerTenant) {
  ASSERT_EQ(StopDaemon(), 0);
  Start({"--tenant_max_unfinished_jobs=1"});
  auto [spec, data] = SmallJob();
  std::shared_ptr<grpc::Channel> channel = client::MakeChannel(server(), Options(lab_a_));
  std::unique_ptr<v1::Reconstruction::Stub> stub = v1::Reconstruction::NewStub(channel);
  grpc::ClientContext context;
  v1::SubmitResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::SubmitRequest>> writer = stub->Submit(&context, &response);
  v1::SubmitRequest request;
  *request.mutable_spec() = spec;
  ASSERT_TRUE(writer->Write(request));
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  absl::Status second;
  do {
    second = Client(lab_a_).Submit(spec, {data}).status();
  } while (second.ok() && absl::Now() < deadline);
  EXPECT_EQ(second.code(), absl::StatusCode::kResourceExhausted) << second;
  EXPECT_THAT(second.message(),
              HasSubstr("quota tenant_max_unfinished_jobs: tenant lab-a has 1 unfinished jobs"));
  EXPECT_THAT(second.message(), HasSubstr("the limit is 1 (--tenant_max_unfinished_jobs)"));
  EXPECT_TRUE(Client(lab_b_).Submit(spec, {data}).ok());
  context.TryCancel();
  writer->Finish().IgnoreError();
}

// ------------------------------------------------------------------ addresses and metrics

TEST_F(SecurityTest, PlainTextOffLoopbackIsRefusedAndTlsLiftsTheRule) {
  ASSERT_EQ(StopDaemon(), 0);
  ProcessResult r = RunProcess({BinaryPath("tomod", TOMOD_BINARY), "--listen=0.0.0.0:0",
                                "--spool_dir=" + spool_dir(), "--metrics_port=0"},
                               dir(), absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("--tls_cert_file"));
  EXPECT_THAT(r.err, HasSubstr("--allow_insecure_remote"));
  r = RunProcess({BinaryPath("tomod", TOMOD_BINARY), "--listen=127.0.0.1:0",
                  "--spool_dir=" + spool_dir(), "--metrics_host=0.0.0.0",
                  "--metrics_port=" + std::to_string(FreeLoopbackPort())},
                 dir(), absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("--metrics_host=0.0.0.0"));
  // With TLS, every interface may be served (the clients still reach it on loopback).
  StartDaemon({"--listen=0.0.0.0:0", "--devices=cpu", "--tls_cert_file=" + Cert("server.crt"),
               "--tls_key_file=" + Cert("server.key"), "--tokens_file=" + tokens_file()});
  EXPECT_TRUE(Client(lab_a_).GetServerInfo().ok());
}

TEST_F(SecurityTest, MetricsAskForTheirTokenAndNameNone) {
  ASSERT_EQ(StopDaemon(), 0);
  std::mt19937_64 random(std::random_device{}());
  const std::string metrics_token = RandomToken(random);
  spare_ = metrics_token;  // checked absent from the log too
  const std::string metrics_file = dir() + "/metrics.token";
  WriteBytes(metrics_file, metrics_token + "\n");
  ASSERT_EQ(chmod(metrics_file.c_str(), 0600), 0);
  const int port = FreeLoopbackPort();
  Start({"--metrics_port=" + std::to_string(port), "--metrics_token_file=" + metrics_file});
  // Some refused calls, so that the counters have something to say.
  EXPECT_FALSE(Client(lab_a_ + "x").ListJobs().ok());
  absl::StatusOr<HttpResponse> refused = HttpGet("127.0.0.1", port, "/metrics");
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, 401);
  absl::StatusOr<HttpResponse> scraped =
      HttpGet("127.0.0.1", port, "/metrics", "GET",
              absl::StrCat("Authorization: Bearer ", metrics_token, "\r\n"));
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  EXPECT_EQ(scraped->status, 200);
  EXPECT_THAT(scraped->body, HasSubstr("tomod_calls_unauthenticated_total 1\n"));
  for (const std::string& token : {lab_a_, lab_b_, admin_, metrics_token}) {
    EXPECT_THAT(scraped->body, Not(HasSubstr(token)));
  }
}

// --listen on IPv6 loopback starts (the metrics endpoint no longer follows its host).
TEST_F(SecurityTest, ListenOnIpv6LoopbackStartsWithMetrics) {
  if (!HasIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  ASSERT_EQ(StopDaemon(), 0);
  const std::string port_file = dir() + "/port6";
  ChildProcess tomod;
  const int metrics_port = FreeLoopbackPort();
  ASSERT_TRUE(tomod
                  .Start({BinaryPath("tomod", TOMOD_BINARY), "--listen=[::1]:0",
                          "--port_file=" + port_file, "--spool_dir=" + spool_dir(),
                          "--devices=cpu", "--metrics_port=" + std::to_string(metrics_port)},
                         dir() + "/tomod6.out", dir() + "/tomod.log.ipv6")
                  .ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (ReadFileOrEmpty(port_file).empty() && absl::Now() < deadline && !tomod.Poll()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const std::string port(absl::StripAsciiWhitespace(ReadFileOrEmpty(port_file)));
  ASSERT_FALSE(port.empty()) << ReadFileOrEmpty(dir() + "/tomod.log.ipv6");
  client::TomoClient client(absl::StrCat("[::1]:", port));
  EXPECT_TRUE(client.GetServerInfo().ok());
  absl::StatusOr<HttpResponse> scraped = HttpGet("127.0.0.1", metrics_port, "/metrics");
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  EXPECT_EQ(scraped->status, 200);
  tomod.Signal(SIGTERM);
  EXPECT_EQ(tomod.Wait(absl::Seconds(60)).value_or(-1), 0);
  Start({});
}

}  // namespace
}  // namespace tomo::testing

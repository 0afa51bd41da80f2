#include "server/storage/job_store.h"
#include "server/storage/sqlite_job_store.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server/jobs/job_id.h"
#include "server/storage/sqlite.h"
#include "tests/runner/test_jobs.h"
#include "tests/core/random_seed.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using testing::NewTempDir;
using testing::SmallSpec;

// Random UTF-8 (what gRPC lets into a proto3 string): ASCII with NUL, and 2-, 3- and
// 4-byte sequences.
std::string RandomText(std::mt19937_64& random, size_t max_chars) {
  std::string text;
  const size_t chars = std::uniform_int_distribution<size_t>(0, max_chars)(random);
  for (size_t i = 0; i < chars; ++i) {
    uint32_t c = 0;
    switch (random() % 4) {
      case 0:
        c = random() % 0x80;
        break;
      case 1:
        c = 0x80 + random() % (0x800 - 0x80);
        break;
      case 2:
        c = 0xe000 + random() % 0x1000;
        break;  // not a surrogate
      default:
        c = 0x10000 + random() % 0x100000;
        break;
    }
    if (c < 0x80) {
      text += static_cast<char>(c);
    } else if (c < 0x800) {
      text += static_cast<char>(0xc0 | (c >> 6));
      text += static_cast<char>(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      text += static_cast<char>(0xe0 | (c >> 12));
      text += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      text += static_cast<char>(0x80 | (c & 0x3f));
    } else {
      text += static_cast<char>(0xf0 | (c >> 18));
      text += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
      text += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      text += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  return text;
}

// A job with random content in every field the store keeps.
StoredJob RandomJob(std::mt19937_64& random, pb::JobState state) {
  StoredJob record;
  pb::Job& job = record.job;
  job.set_id(NewJobId());
  job.set_state(state);
  *job.mutable_spec() =
      SmallSpec(static_cast<uint32_t>(8 + random() % 64), static_cast<uint32_t>(4 + random() % 90));
  job.mutable_spec()->set_name(RandomText(random, 200));
  job.mutable_spec()->set_priority(static_cast<int32_t>(random() % 201) - 100);
  job.set_attempts(static_cast<uint32_t>(random() % 5));
  job.set_input_bytes(random() % (uint64_t{1} << 40));
  job.mutable_created()->set_seconds(static_cast<int64_t>(random() % 4000000000));
  if (state == pb::JOB_STATE_SUCCEEDED || state == pb::JOB_STATE_FAILED ||
      state == pb::JOB_STATE_CANCELLED) {
    job.mutable_finished()->set_seconds(static_cast<int64_t>(random() % 4000000000));
    job.mutable_finished()->set_nanos(static_cast<int32_t>(random() % 1000000000));
  }
  if (state == pb::JOB_STATE_SUCCEEDED) {
    pb::ResultFile* file = job.add_results();
    file->set_name("volume.raw");
    file->set_size_bytes(random());
    file->set_crc32(static_cast<uint32_t>(random()));
  }
  if (state == pb::JOB_STATE_FAILED) job.set_error(RandomText(random, 300));
  record.cancel_requested = random() % 2 == 0;
  record.event_sequence = random() % 1000000;
  return record;
}

::testing::AssertionResult SameRecord(const StoredJob& a, const StoredJob& b) {
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  if (!differencer.Compare(a.job, b.job)) {
    return ::testing::AssertionFailure() << "jobs differ: " << diff;
  }
  if (a.cancel_requested != b.cancel_requested || a.event_sequence != b.event_sequence) {
    return ::testing::AssertionFailure()
           << "cancel_requested " << a.cancel_requested << " vs " << b.cancel_requested
           << ", event_sequence " << a.event_sequence << " vs " << b.event_sequence;
  }
  return ::testing::AssertionSuccess();
}

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = tomo::testing::TestSeed();
    random_.seed(seed_);
    path_ = NewTempDir("store") + "/tomod.db";
  }

  std::unique_ptr<JobStore> OpenStore() {
    absl::StatusOr<std::unique_ptr<JobStore>> store = JobStore::Open(path_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  uint64_t seed_ = 0;
  std::mt19937_64 random_;
  std::string path_;
};

TEST_F(JobStoreTest, RecordsSurviveReopeningInIdOrder) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  std::vector<StoredJob> written;
  {
    std::unique_ptr<JobStore> store = OpenStore();
    ASSERT_NE(store, nullptr);
    const pb::JobState states[] = {pb::JOB_STATE_UPLOADING, pb::JOB_STATE_QUEUED,
                                   pb::JOB_STATE_RUNNING,   pb::JOB_STATE_SUCCEEDED,
                                   pb::JOB_STATE_FAILED,    pb::JOB_STATE_CANCELLED};
    const int count = 20 + static_cast<int>(random_() % 30);
    for (int i = 0; i < count; ++i) {
      written.push_back(RandomJob(random_, states[random_() % 6]));
    }
    // Written in a random order; read back in id order.
    std::vector<StoredJob> shuffled = written;
    std::shuffle(shuffled.begin(), shuffled.end(), random_);
    for (const StoredJob& record : shuffled) ASSERT_TRUE(store->Put(record).ok());
  }
  std::unique_ptr<JobStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<StoredJob>> loaded = store->LoadAll();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    EXPECT_TRUE(SameRecord((*loaded)[i], written[i])) << "record " << i;
  }
  absl::StatusOr<std::optional<StoredJob>> one = store->Get(written[7].job.id());
  ASSERT_TRUE(one.ok() && one->has_value());
  EXPECT_TRUE(SameRecord(**one, written[7]));
  EXPECT_FALSE(store->Get(NewJobId())->has_value());
}

TEST_F(JobStoreTest, PutReplacesAndDeleteRemoves) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  std::unique_ptr<JobStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  StoredJob record = RandomJob(random_, pb::JOB_STATE_QUEUED);
  ASSERT_TRUE(store->Put(record).ok());
  StoredJob later = RandomJob(random_, pb::JOB_STATE_SUCCEEDED);
  later.job.set_id(record.job.id());
  ASSERT_TRUE(store->Put(later).ok());
  absl::StatusOr<std::vector<StoredJob>> loaded = store->LoadAll();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_TRUE(SameRecord(loaded->front(), later));

  ASSERT_TRUE(store->Delete(record.job.id()).ok());
  EXPECT_TRUE(store->LoadAll()->empty());
  EXPECT_TRUE(store->Delete(record.job.id()).ok()) << "deleting twice is harmless";
}

TEST_F(JobStoreTest, AnIdempotencyKeyBelongsToOneCommittedJob) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  std::unique_ptr<JobStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  const std::string key = absl::StrCat("key-", random_());
  StoredJob first = RandomJob(random_, pb::JOB_STATE_UPLOADING);
  StoredJob second = RandomJob(random_, pb::JOB_STATE_UPLOADING);
  first.job.mutable_spec()->set_idempotency_key(key);
  second.job.mutable_spec()->set_idempotency_key(key);
  // Two uploads with one key may exist at once: neither owns it yet.
  ASSERT_TRUE(store->Put(first).ok());
  ASSERT_TRUE(store->Put(second).ok());
  EXPECT_FALSE(store->FindByIdempotencyKey(key)->has_value());

  first.job.set_state(pb::JOB_STATE_QUEUED);
  ASSERT_TRUE(store->Put(first).ok());
  EXPECT_EQ(store->FindByIdempotencyKey(key)->value_or(""), first.job.id());
  // The first job keeps the key through its later states.
  first.job.set_state(pb::JOB_STATE_RUNNING);
  ASSERT_TRUE(store->Put(first).ok());

  second.job.set_state(pb::JOB_STATE_QUEUED);
  absl::Status taken = store->Put(second);
  EXPECT_EQ(taken.code(), absl::StatusCode::kAlreadyExists) << taken;
  EXPECT_THAT(taken.message(), HasSubstr(absl::StrCat("idempotency_key: \"", key, "\"")));
  // Refused means unchanged: the second job is still the UPLOADING record.
  EXPECT_EQ(store->Get(second.job.id())->value().job.state(), pb::JOB_STATE_UPLOADING);

  // Once the first job is gone the key is free.
  ASSERT_TRUE(store->Delete(first.job.id()).ok());
  EXPECT_TRUE(store->Put(second).ok());
  EXPECT_EQ(store->FindByIdempotencyKey(key)->value_or(""), second.job.id());
}

TEST_F(JobStoreTest, UsesWalAndRefusesANewerSchema) {
  ASSERT_NE(OpenStore(), nullptr);
  {
    absl::StatusOr<SqliteDb> db = SqliteDb::Open(path_);
    ASSERT_TRUE(db.ok()) << db.status();
    // journal_mode=WAL is a property of the file: another connection sees it.
    EXPECT_EQ(db->QueryText("PRAGMA journal_mode").value_or(""), "wal");
    EXPECT_EQ(db->QueryInt("PRAGMA user_version").value_or(-1), SqliteJobStore::kSchemaVersion);
    ASSERT_TRUE(db->Exec("PRAGMA user_version=7").ok());
  }
  absl::StatusOr<std::unique_ptr<JobStore>> newer = JobStore::Open(path_);
  EXPECT_EQ(newer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(newer.status().message(),
              HasSubstr(absl::StrCat("schema version 7 was written by a newer tomod; this one "
                                     "knows versions up to ",
                                     SqliteJobStore::kSchemaVersion)));
}

TEST_F(JobStoreTest, AnUnreadableRecordIsLeftOutAndNamed) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  std::unique_ptr<JobStore> first = OpenStore();
  ASSERT_NE(first, nullptr);
  const StoredJob good = RandomJob(random_, pb::JOB_STATE_QUEUED);
  ASSERT_TRUE(first->Put(good).ok());
  first.reset();
  const std::string id = NewJobId();
  {
    absl::StatusOr<SqliteDb> db = SqliteDb::Open(path_);
    ASSERT_TRUE(db.ok());
    // 0xff... is a truncated varint: never a valid message.
    ASSERT_TRUE(db->Exec(absl::StrCat("INSERT INTO jobs (id, state, job) VALUES ('", id,
                                      "', 2, x'ffffffff')"))
                    .ok());
  }
  std::unique_ptr<JobStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::vector<std::string> unreadable;
  absl::StatusOr<std::vector<StoredJob>> loaded = store->LoadAll(&unreadable);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_TRUE(SameRecord(loaded->front(), good));
  EXPECT_THAT(unreadable, ::testing::ElementsAre(id));
  absl::StatusOr<std::optional<StoredJob>> get = store->Get(id);
  EXPECT_EQ(get.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(get.status().message(), HasSubstr(store->path()));
}

TEST_F(JobStoreTest, APutThatReturnedSurvivesSigkill) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  std::vector<StoredJob> written;
  for (int i = 0; i < 10; ++i) written.push_back(RandomJob(random_, pb::JOB_STATE_QUEUED));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // No destructors, no close: what Put returned for must already be on disk.
    absl::StatusOr<std::unique_ptr<JobStore>> store = JobStore::Open(path_);
    if (!store.ok()) ::_exit(2);
    for (const StoredJob& record : written) {
      if (!(*store)->Put(record).ok()) ::_exit(3);
    }
    ::kill(::getpid(), SIGKILL);
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child exit status " << status;
  std::unique_ptr<JobStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<StoredJob>> loaded = store->LoadAll();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) EXPECT_TRUE(SameRecord((*loaded)[i], written[i]));
}

}  // namespace
}  // namespace tomo::server

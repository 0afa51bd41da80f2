#include "server/storage/job_store_writer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/telemetry/log.h"

namespace tomo::server {
namespace {

// Failures kept for Wait beyond this many are forgotten, oldest first (nobody waited).
constexpr size_t kMaxKeptFailures = 1024;

std::string Describe(const JobStoreWrite& write) {
  if (!write.put.has_value()) return absl::StrCat("the removal of job ", write.id);
  return absl::StrCat("job ", write.id, "'s change to ",
                      tomoserve::v1::JobState_Name(write.put->job.state()));
}

}  // namespace

JobStoreWriter::JobStoreWriter(JobStore& store, std::function<bool()> free_emergency_space,
                               std::function<void(Ticket)> on_durable)
    : store_(store), free_emergency_space_(std::move(free_emergency_space)),
      on_durable_(std::move(on_durable)) {
  thread_ = std::thread([this] { Loop(); });
}

JobStoreWriter::~JobStoreWriter() { Stop(); }

JobStoreWriter::Ticket JobStoreWriter::Enqueue(JobStoreWrite write) {
  Ticket ticket;
  {
    absl::MutexLock lock(&mu_);
    ticket = next_ticket_++;
    if (!stopping_) {
      queued_.push_back(std::move(write));
      return ticket;
    }
  }
  // Stopped: nobody else writes, so the ticket order holds.
  absl::MutexLock write_lock(&write_mu_);
  std::map<Ticket, absl::Status> failed = Write({std::move(write)}, ticket);
  absl::MutexLock lock(&mu_);
  failures_.merge(failed);
  ended_ = std::max(ended_, ticket);
  return ticket;
}

absl::Status JobStoreWriter::Wait(Ticket ticket) {
  absl::MutexLock lock(&mu_);
  auto ended = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_ >= ticket; };
  mu_.Await(absl::Condition(&ended));
  // Kept for other waiters of the same ticket (bounded, see Loop).
  auto failed = failures_.find(ticket);
  return failed == failures_.end() ? absl::OkStatus() : failed->second;
}

JobStoreWriter::Ticket JobStoreWriter::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}

void JobStoreWriter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void JobStoreWriter::Loop() {
  for (;;) {
    std::vector<JobStoreWrite> batch;
    Ticket first;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queued_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queued_.empty()) return;  // stopping, and everything written
      first = ended_ + 1;
      batch.assign(std::make_move_iterator(queued_.begin()),
                   std::make_move_iterator(queued_.end()));
      queued_.clear();
    }
    std::map<Ticket, absl::Status> failed;
    {
      absl::MutexLock write_lock(&write_mu_);
      failed = Write(batch, first);
    }
    const Ticket last = first + batch.size() - 1;
    // The watchers first, then the waiters: whoever waited for a change (a cancel's reply)
    // answers after its watchers were given the event.
    if (on_durable_) on_durable_(last);
    {
      absl::MutexLock lock(&mu_);
      failures_.merge(failed);
      while (failures_.size() > kMaxKeptFailures) failures_.erase(failures_.begin());
      ended_ = last;
    }
  }
}

std::map<JobStoreWriter::Ticket, absl::Status> JobStoreWriter::Write(
    const std::vector<JobStoreWrite>& batch, Ticket first) {
  std::map<Ticket, absl::Status> failed;
  if (WithRoom([&] { return store_.Apply(batch); }).ok()) return failed;
  // One write spoils the transaction: each alone, so that only it fails.
  for (size_t i = 0; i < batch.size(); ++i) {
    absl::Status status = WithRoom([&] { return store_.Apply({batch[i]}); });
    if (status.ok()) continue;
    Log(absl::StrCat("job database ", store_.path(), ": cannot record ", Describe(batch[i]),
                     " (", absl::StatusCodeToString(status.code()), ": ", status.message(),
                     "); after a restart the job is what the database last held"),
        LogLevel::kError);
    failed.emplace(first + i, std::move(status));
  }
  return failed;
}

absl::Status JobStoreWriter::WithRoom(const std::function<absl::Status()>& change) {
  absl::Status status = change();
  if (absl::IsResourceExhausted(status) && free_emergency_space_ && free_emergency_space_()) {
    Log(absl::StrCat("job database write failed for want of space (", status.message(),
                     "); freed the spool's reserve and tried again"));
    status = change();
  }
  return status;
}

}  // namespace tomo::server

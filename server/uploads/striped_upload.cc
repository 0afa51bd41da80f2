#include "server/uploads/striped_upload.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "transfer/chunk_reader.h"

namespace tomo::server {
namespace {

void ResumeAll(std::vector<std::function<void()>> streams) {
  for (std::function<void()>& resume : streams) resume();
}

}  // namespace

absl::StatusOr<UploadStripes> ValidateUploadStriping(const tomoserve::v1::UploadStriping& striping) {
  UploadStripes stripes;
  stripes.count = std::max<uint32_t>(striping.count(), 1);
  if (stripes.count > kMaxUploadStripes) {
    return absl::InvalidArgumentError(absl::StrCat("striping.count: ", striping.count(),
                                                   " is out of range [0, ", kMaxUploadStripes,
                                                   "]"));
  }
  if (striping.unit_bytes() != 0) {
    if (striping.unit_bytes() < kMinUploadUnitBytes || striping.unit_bytes() > kMaxUploadUnitBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "striping.unit_bytes: ", striping.unit_bytes(), " is out of range [",
          kMinUploadUnitBytes, ", ", kMaxUploadUnitBytes, "] (0 means ", kDefaultUploadUnitBytes,
          ")"));
    }
    stripes.unit_bytes = striping.unit_bytes();
  }
  return stripes;
}

StripedUpload::StripedUpload(std::unique_ptr<Upload> upload, std::string client,
                             UploadStripes stripes, uint64_t max_ahead_bytes)
    : job_id_(upload->job_id()), client_(std::move(client)), stripes_(stripes),
      total_bytes_(upload->expected_bytes()),
      max_ahead_bytes_(std::max(max_ahead_bytes, 4 * stripes.count * stripes.unit_bytes)),
      upload_(std::move(upload)), stripe_(stripes.count) {
  for (uint32_t index = 0; index < stripes_.count; ++index) {
    stripe_[index].next_offset = uint64_t{index} * stripes_.unit_bytes;
  }
  stripe_[0].opened = true;  // the Submit call
  upload_->SetOnRoom([this] { OnWriterRoom(); });
}

StripedUpload::~StripedUpload() {
  Abort(absl::CancelledError("the striped upload ended before upload_end"));
  // The Upload (and its writer's threads, which call OnWriterRoom) goes before the members
  // that callback uses.
  absl::MutexLock lock(&mu_);
  upload_.reset();
}

bool StripedUpload::writes_through_mapping() const {
  absl::MutexLock lock(&mu_);
  return upload_ != nullptr && upload_->writes_through_mapping();
}

uint64_t StripedUpload::UnitEnd(uint64_t offset) const {
  return std::min(total_bytes_, (offset / stripes_.unit_bytes + 1) * stripes_.unit_bytes);
}

absl::Status StripedUpload::Open(uint32_t index) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (index == 0 || index >= stripes_.count) {
    return absl::InvalidArgumentError(absl::StrCat("open.stripe_index: ", index,
                                                   " is out of range [1, ", stripes_.count,
                                                   ") for job ", job_id_, "'s upload"));
  }
  if (stripe_[index].opened) {
    return absl::InvalidArgumentError(absl::StrCat("open.stripe_index: stripe ", index,
                                                   " of job ", job_id_,
                                                   "'s upload is sent by another call already"));
  }
  stripe_[index].opened = true;
  return absl::OkStatus();
}

absl::StatusOr<bool> StripedUpload::Append(uint32_t index, std::optional<uint64_t> offset,
                                           std::string data, std::function<void()> resume) {
  std::vector<std::function<void()>> resume_now;
  absl::StatusOr<bool> result;
  {
    absl::MutexLock lock(&mu_);
    result = AppendLocked(index, offset, std::move(data), resume, &resume_now);
  }
  ResumeAll(std::move(resume_now));
  if (!result.ok()) ResumeEveryPausedStream();
  return result;
}

absl::StatusOr<bool> StripedUpload::AppendLocked(uint32_t index, std::optional<uint64_t> offset,
                                                 std::string data, std::function<void()>& resume,
                                                 std::vector<std::function<void()>>* resume_now) {
  if (!error_.ok()) return error_;
  if (committing_) {
    return absl::FailedPreconditionError(
        absl::StrCat("data: sent after upload_end of job ", job_id_));
  }
  if (index >= stripes_.count || !stripe_[index].opened) {
    return FailLocked(absl::InternalError(absl::StrCat("stripe ", index, " of job ", job_id_,
                                                       " was not opened")));
  }
  Stripe& stripe = stripe_[index];
  const uint64_t expected = stripe.next_offset;
  if (expected >= total_bytes_) {
    return FailLocked(absl::InvalidArgumentError(absl::StrCat(
        "data: stripe ", index, " of ", stripes_.count, " of job ", job_id_,
        " has no unit left at offset ", expected, "; input.size_bytes is ", total_bytes_)));
  }
  if (offset.has_value() && *offset != expected) {
    return FailLocked(absl::InvalidArgumentError(
        absl::StrCat("data.offset: ", *offset, "; stripe ", index, " of ", stripes_.count,
                     " of job ", job_id_, " expects its next unit at ", expected)));
  }
  const uint64_t size = UnitEnd(expected) - expected;
  if (data.size() != size) {
    return FailLocked(absl::InvalidArgumentError(absl::StrCat(
        "data: ", data.size(), " bytes at offset ", expected, " of job ", job_id_,
        "'s input; the unit there is ", size, " bytes (striping.unit_bytes ",
        stripes_.unit_bytes, ", the input's last unit may be shorter)")));
  }
  stripe.next_offset += uint64_t{stripes_.count} * stripes_.unit_bytes;
  stripe.received_bytes += size;

  if (expected != in_order_bytes_) {
    ahead_bytes_ += size;
    ahead_.emplace(expected, std::move(data));
    // Ahead of the first missing unit: this stream pauses when too much waits here, unless
    // its next unit is the one missing.
    if (ahead_bytes_ > max_ahead_bytes_ && stripe.next_offset != in_order_bytes_) {
      stripe.paused = std::move(resume);
      return false;
    }
    return true;
  }
  const uint64_t epoch = RoomEpoch();
  TOMO_ASSIGN_OR_RETURN(const bool room, HandInOrderLocked(std::move(data)));
  *resume_now = ResumableLocked();
  if (room) return true;
  return !WaitForRoom(epoch, std::move(resume));
}

absl::StatusOr<bool> StripedUpload::HandInOrderLocked(std::string data) {
  bool room = true;
  for (;;) {
    const uint64_t size = data.size();
    absl::StatusOr<bool> appended = upload_->Append(std::move(data));
    if (!appended.ok()) return FailLocked(appended.status());
    room = room && *appended;
    in_order_bytes_ += size;
    auto next = ahead_.begin();
    if (next == ahead_.end() || next->first != in_order_bytes_) return room;
    data = std::move(next->second);
    ahead_bytes_ -= data.size();
    ahead_.erase(next);
  }
}

std::vector<std::function<void()>> StripedUpload::ResumableLocked() {
  std::vector<std::function<void()>> resumable;
  for (Stripe& stripe : stripe_) {
    if (!stripe.paused) continue;
    if (ahead_bytes_ <= max_ahead_bytes_ || stripe.next_offset == in_order_bytes_) {
      resumable.push_back(std::move(stripe.paused));
      stripe.paused = nullptr;
    }
  }
  return resumable;
}

uint64_t StripedUpload::RoomEpoch() const {
  absl::MutexLock lock(&room_mu_);
  return room_epoch_;
}

bool StripedUpload::WaitForRoom(uint64_t epoch, std::function<void()> resume) {
  absl::MutexLock lock(&room_mu_);
  if (room_epoch_ != epoch) return false;
  room_waiters_.push_back(std::move(resume));
  return true;
}

void StripedUpload::OnWriterRoom() {
  std::vector<std::function<void()>> waiting;
  {
    absl::MutexLock lock(&room_mu_);
    ++room_epoch_;
    waiting.swap(room_waiters_);
  }
  ResumeAll(std::move(waiting));
}

absl::Status StripedUpload::FailLocked(absl::Status status) {
  if (error_.ok()) {
    error_ = status;
    upload_->Abort(status);
    ahead_.clear();
    ahead_bytes_ = 0;
  }
  return status;
}

absl::Status StripedUpload::EndStripe(uint32_t index) {
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
    Stripe& stripe = stripe_[index];
    if (stripe.next_offset < total_bytes_) {
      transfer::StripeLayout layout;
      layout.size = total_bytes_;
      layout.count = stripes_.count;
      layout.index = index;
      layout.unit_bytes = stripes_.unit_bytes;
      status = FailLocked(absl::InvalidArgumentError(absl::StrCat(
          "stripe ", index, " of ", stripes_.count, " of job ", job_id_, "'s upload ended after ",
          stripe.received_bytes, " of its ", layout.StripeBytes(),
          " bytes, before its unit at offset ", stripe.next_offset)));
    } else {
      stripe.ended = true;
    }
  }
  if (!status.ok()) ResumeEveryPausedStream();
  return status;
}

uint64_t StripedUpload::StripeBytesReceived(uint32_t index) const {
  absl::MutexLock lock(&mu_);
  return index < stripe_.size() ? stripe_[index].received_bytes : 0;
}

void StripedUpload::CommitAsync(uint64_t total_bytes, uint32_t crc32,
                                std::function<void(absl::StatusOr<tomoserve::v1::Job>)> done,
                                std::function<absl::Status()> last_check) {
  Upload* upload = nullptr;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = error_;
    for (uint32_t index = 1; status.ok() && index < stripes_.count; ++index) {
      if (!stripe_[index].ended) {
        status = FailLocked(absl::InvalidArgumentError(absl::StrCat(
            "upload_end: stripe ", index, " of ", stripes_.count, " of job ", job_id_,
            " has not ended; send upload_end after every SubmitStripe call ended OK")));
      }
    }
    if (status.ok() && stripe_[0].next_offset < total_bytes_) {
      status = FailLocked(absl::InvalidArgumentError(absl::StrCat(
          "upload_end: stripe 0 of job ", job_id_, " is missing its unit at offset ",
          stripe_[0].next_offset, " (input.size_bytes ", total_bytes_, ")")));
    }
    if (status.ok()) {
      committing_ = true;
      upload = upload_.get();
    }
  }
  if (!status.ok()) {
    ResumeEveryPausedStream();
    return done(status);
  }
  // The Upload checks total_bytes and the CRC-32; the stripes have ended, so nothing else
  // touches it now.
  upload->CommitAsync(total_bytes, crc32, std::move(done), std::move(last_check));
}

void StripedUpload::Abort(const absl::Status& reason) {
  {
    absl::MutexLock lock(&mu_);
    if (committing_ || !error_.ok() || upload_ == nullptr) return;
    FailLocked(reason).IgnoreError();
  }
  ResumeEveryPausedStream();
}

void StripedUpload::ResumeEveryPausedStream() {
  std::vector<std::function<void()>> paused;
  {
    absl::MutexLock lock(&mu_);
    for (Stripe& stripe : stripe_) {
      if (!stripe.paused) continue;
      paused.push_back(std::move(stripe.paused));
      stripe.paused = nullptr;
    }
  }
  {
    absl::MutexLock lock(&room_mu_);
    for (std::function<void()>& resume : room_waiters_) paused.push_back(std::move(resume));
    room_waiters_.clear();
  }
  ResumeAll(std::move(paused));
}

void StripedUploadRegistry::Add(const std::shared_ptr<StripedUpload>& upload) {
  absl::MutexLock lock(&mu_);
  uploads_[upload->job_id()] = upload;
}

void StripedUploadRegistry::Remove(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  uploads_.erase(job_id);
}

absl::StatusOr<std::shared_ptr<StripedUpload>> StripedUploadRegistry::Find(
    const std::string& job_id, const std::string& client) const {
  std::shared_ptr<StripedUpload> upload;
  {
    absl::MutexLock lock(&mu_);
    auto it = uploads_.find(job_id);
    if (it != uploads_.end()) upload = it->second.lock();
  }
  if (upload == nullptr) {
    return absl::NotFoundError(absl::StrCat("open.job_id: job ", job_id,
                                            " has no striped upload in progress"));
  }
  if (upload->client() != client) {
    return absl::PermissionDeniedError(absl::StrCat("open.job_id: job ", job_id,
                                                    "'s upload was begun by client ",
                                                    upload->client(), ", not ", client));
  }
  return upload;
}

}  // namespace tomo::server

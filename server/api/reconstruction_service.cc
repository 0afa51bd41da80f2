#include "server/api/reconstruction_service.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/build_info.h"
#include "core/base/status_macros.h"
#include "core/devices/devices.h"
#include "transfer/chunk_reader.h"
#include "server/api/client_identity.h"
#include "server/uploads/fetch_message.h"
#include "server/jobs/job_id.h"
#include "transfer/grpc_status.h"
#include "server/telemetry/log.h"
#include "server/uploads/upload_reactors.h"
#include "server/api/wire_message.h"

namespace tomo::server {

namespace pb = ::tomoserve::v1;

namespace {

// ---------------------------------------------------------------- WatchJob

// A server-streaming reactor that watches one job (WatchJob, and FetchResult of a result
// being written). Writes are driven by whoever holds the busy token (busy_ set under
// mu_): the manager after Enqueue/Close returned true (it then calls Flush), the reactor
// between StartWrite and OnWriteDone, or OnCancel. Only the holder calls Drive, which
// calls StartWrite or Finish, always outside mu_, so there is at most one write in flight
// and Finish comes exactly once. Subclasses write Enqueue and Close (taking the token
// with TakeTokenLocked) and Drive (giving it back by clearing busy_, or for good with
// StopDrivingLocked before Finish).
template <typename Response>
class JobWatchingWriteReactor : public grpc::ServerWriteReactor<Response>, public JobWatcher {
 public:
  void Flush() override { Drive(); }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;  // the stream is broken; only Finish is left to do
    }
    Drive();
  }

  void OnCancel() override {
    bool drive = false;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      drive = TakeTokenLocked();
    }
    if (drive) Drive();
  }

  void OnDone() override {
    manager_.Unwatch(job_id_, this);  // a no-op when the watch never began
    delete this;
  }

 protected:
  // busy: the constructor holds the token (it drives the first write itself).
  JobWatchingWriteReactor(JobManager& manager, std::string job_id, bool busy)
      : manager_(manager), job_id_(std::move(job_id)), busy_(busy) {}

  // Called by the token holder only.
  virtual void Drive() = 0;

  // True when the caller now holds the token (the reactor was idle).
  bool TakeTokenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (busy_ || finishing_) return false;
    busy_ = true;
    return true;
  }
  // The holder is about to call Finish: nobody takes the token again.
  void StopDrivingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    finishing_ = true;
    busy_ = false;
  }

  JobManager& manager_;
  const std::string job_id_;
  absl::Mutex mu_;
  bool busy_ ABSL_GUARDED_BY(mu_);
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// Sends the job's events in order, the current state first, then ends with the job (OK)
// or with the watch's closing status.
class WatchReactor final : public JobWatchingWriteReactor<grpc::ByteBuffer> {
 public:
  WatchReactor(JobManager& manager, std::string job_id)
      : JobWatchingWriteReactor(manager, std::move(job_id), /*busy=*/false) {
    absl::Status status = manager_.Watch(job_id_, this);
    if (!status.ok()) Finish(transfer::ToGrpcStatus(status));
  }
  // A watch that ends at once (the request did not parse).
  explicit WatchReactor(JobManager& manager, const absl::Status& status)
      : JobWatchingWriteReactor(manager, "", /*busy=*/false) {
    Finish(transfer::ToGrpcStatus(status));
  }

  bool Enqueue(const pb::JobEvent& event) override {
    absl::MutexLock lock(&mu_);
    if (final_status_) return false;
    pending_.push_back(event);
    if (event.state() == pb::JOB_STATE_SUCCEEDED || event.state() == pb::JOB_STATE_FAILED ||
        event.state() == pb::JOB_STATE_CANCELLED) {
      final_status_ = grpc::Status::OK;
    }
    return TakeTokenLocked();
  }

  bool Close(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    if (final_status_) return false;
    final_status_ = transfer::ToGrpcStatus(status);
    return TakeTokenLocked();
  }

 private:
  // Starts the next write, or Finish, or gives the token back.
  void Drive() override {
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) {
        finish = grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled");
      } else if (!pending_.empty()) {
        in_flight_ = std::move(pending_.front());
        pending_.pop_front();
      } else if (final_status_) {
        finish = *final_status_;
      } else {
        busy_ = false;
        return;
      }
      if (finish) StopDrivingLocked();
    }
    if (!finish) {
      absl::Status serialized = SerializeMessage(in_flight_, &message_);
      if (serialized.ok()) {
        StartWrite(&message_);
        return;
      }
      {
        absl::MutexLock lock(&mu_);
        StopDrivingLocked();
      }
      finish = transfer::ToGrpcStatus(serialized);
    }
    Finish(*finish);
  }

  pb::JobEvent in_flight_;      // owned by the token holder
  grpc::ByteBuffer message_;    // in_flight_'s bytes, being written
  std::deque<pb::JobEvent> pending_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> final_status_ ABSL_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------- FetchResult

// INVALID_ARGUMENT naming the stripe field of request that is out of range.
absl::Status CheckStripeFields(const pb::FetchResultRequest& request) {
  if (request.stripe_count() > kMaxFetchStripes) {
    return absl::InvalidArgumentError(absl::StrCat("stripe_count: ", request.stripe_count(),
                                                   " is more than ", kMaxFetchStripes));
  }
  const uint32_t stripes = std::max<uint32_t>(1, request.stripe_count());
  if (request.stripe_index() >= stripes) {
    return absl::InvalidArgumentError(absl::StrCat("stripe_index: ", request.stripe_index(),
                                                   " is not below stripe_count ", stripes));
  }
  if (request.stripe_bytes() != 0 && (request.stripe_bytes() < kMinFetchStripeBytes ||
                                      request.stripe_bytes() > kMaxFetchStripeBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stripe_bytes: ", request.stripe_bytes(), " is outside [", kMinFetchStripeBytes, ", ",
        kMaxFetchStripeBytes, "] (0 means ", kDefaultFetchStripeBytes, ")"));
  }
  return absl::OkStatus();
}

// The bytes of a file of size bytes that request's stream carries (checked fields).
transfer::StripeLayout StripeOf(const pb::FetchResultRequest& request, uint64_t size) {
  transfer::StripeLayout stripe;
  stripe.offset = request.offset();
  stripe.size = size;
  stripe.count = std::max<uint32_t>(1, request.stripe_count());
  stripe.index = request.stripe_index();
  stripe.unit_bytes =
      request.stripe_bytes() == 0 ? kDefaultFetchStripeBytes : request.stripe_bytes();
  return stripe;
}

// Streams a result file (result: FindResult's answer for request, a file or an error). A
// transfer::ChunkReader faults the next chunks of the file's mapping in on its own threads
// while the current one is on the wire; when the next is not ready yet, its on_ready
// callback sends it. Each message refers to its chunk in the mapping (FetchMessage).
class FetchReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  FetchReactor(TomodMetrics* metrics, const pb::FetchResultRequest& request,
               absl::StatusOr<JobManager::ResultLocation> result)
      : metrics_(metrics) {
    if (!result.ok()) {
      Finish(transfer::ToGrpcStatus(result.status()));
      return;
    }
    file_ = result->file;
    if (request.offset() > file_.size_bytes()) {
      Finish(grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                          absl::StrCat("offset: ", request.offset(), " is beyond the end of ",
                                       file_.name(), " (", file_.size_bytes(), " bytes)")));
      return;
    }
    const transfer::StripeLayout stripe = StripeOf(request, file_.size_bytes());
    transfer::ChunkReader::Options options;
    options.chunk_bytes = kFetchChunkBytes;
    options.threads = 2;
    options.checksum = false;  // the result's CRC-32 is recorded
    options.map_files = true;  // results are never cut in place: sent from the mapping
    options.stripe_count = stripe.count;
    options.stripe_index = stripe.index;
    options.stripe_bytes = stripe.unit_bytes;
    absl::StatusOr<std::unique_ptr<transfer::ChunkReader>> reader =
        transfer::ChunkReader::Open({result->path}, request.offset(), options);
    if (!reader.ok()) {
      Finish(grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat("cannot read result ", file_.name(), " of job ",
                                       request.job_id(), ": ", reader.status().message())));
      return;
    }
    reader_ = std::move(*reader);
    if (reader_->total_bytes() != stripe.StripeBytes()) {
      Finish(grpc::Status(grpc::StatusCode::DATA_LOSS,
                          absl::StrCat("result ", file_.name(), " of job ", request.job_id(),
                                       " is not the ", file_.size_bytes(),
                                       " bytes that were recorded (stripe ", stripe.index,
                                       " of ", stripe.count, ": ", reader_->total_bytes(),
                                       " bytes, expected ", stripe.StripeBytes(), ")")));
      return;
    }
    SendNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "fetch cancelled"));
      return;
    }
    SendNext();
  }

  void OnDone() override { delete this; }  // ~ChunkReader stops its threads

 private:
  void SendNext() {
    absl::StatusOr<std::optional<transfer::ChunkReader::Chunk>> chunk;
    if (!reader_->TryNext(&chunk, [this] { SendNext(); })) return;  // on_ready sends it
    if (!chunk.ok()) {
      Finish(grpc::Status(grpc::StatusCode::DATA_LOSS,
                          absl::StrCat("result ", file_.name(), ": ", chunk.status().message())));
      return;
    }
    response_.Clear();
    if (sent_messages_++ == 0) response_.set_file_bytes(file_.size_bytes());
    std::string_view data;
    std::shared_ptr<const void> mapping;
    if (chunk->has_value()) {
      response_.set_offset((*chunk)->offset);  // one file: offsets in it are the file's
      data = (*chunk)->view();
      mapping = std::move((*chunk)->mapping);
      sent_bytes_ += data.size();
      if (metrics_ != nullptr) metrics_->FetchBytes(data.size());
    } else {
      // An empty file, a fetch from its end, or a stripe without a unit.
      response_.set_offset(file_.size_bytes());
    }
    if (sent_bytes_ == reader_->total_bytes()) {
      if (metrics_ != nullptr) {
        metrics_->StageDone(TomodMetrics::Stage::kFetch,
                            absl::ToDoubleSeconds(absl::Now() - start_));
      }
      response_.set_last(true);
      response_.set_total_bytes(file_.size_bytes());
      response_.set_crc32(file_.crc32());
    }
    message_ = FetchMessage(response_, data, std::move(mapping));
    if (response_.last()) {
      StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      StartWrite(&message_);
    }
  }

  TomodMetrics* metrics_;
  const absl::Time start_ = absl::Now();
  pb::ResultFile file_;
  std::unique_ptr<transfer::ChunkReader> reader_;
  uint64_t sent_bytes_ = 0;
  uint64_t sent_messages_ = 0;  // the first carries file_bytes
  pb::FetchResultResponse response_;  // the next message's fields, but its data
  grpc::ByteBuffer message_;          // the message being written
};

// "JOB_STATE_FAILED" -> "FAILED".
std::string ShortStateName(pb::JobState state) {
  const std::string name = pb::JobState_Name(state);
  constexpr absl::string_view kPrefix = "JOB_STATE_";
  return absl::StartsWith(name, kPrefix) ? name.substr(kPrefix.size()) : name;
}

// Streams the raw result while the job's worker writes it (JobManager's early fetch,
// job_manager.h): the bytes from the shared volume in memory, in the messages of a file
// fetch (of its stripe, when striped), all but the last chunk at once. The last chunk
// (an empty message for a stripe without a unit) is held back until the job has
// ended, which this reactor learns as the job's JobWatcher: SUCCEEDED (the file is
// durable) sends it with last, total_bytes and the recorded CRC-32, exactly as a file
// fetch ends; any other end (FAILED, CANCELLED, QUEUED again by a shutdown, the watch
// closed) finishes with ABORTED naming the job, its state and its error, so that the
// client never holds the bytes as a result. Nothing blocks a gRPC thread while it waits.
//
// The token (JobWatchingWriteReactor) is held by the constructor, then OnWriteDone while
// chunks remain to be sent; once idle (waiting for the job), by the manager's Flush after
// a terminal event, or by OnCancel. Only the holder touches offset_ and message_.
// offset_ is where the next chunk of the stripe is looked for (stripe_.NextRange).
class EarlyFetchReactor final : public JobWatchingWriteReactor<grpc::ByteBuffer> {
 public:
  EarlyFetchReactor(JobManager& manager, TomodMetrics* metrics,
                    const pb::FetchResultRequest& request, JobManager::ResultLocation location)
      : JobWatchingWriteReactor(manager, request.job_id(), /*busy=*/true),
        metrics_(metrics),
        name_(location.file.name()),
        volume_(std::move(location.being_written)),
        size_(volume_->size_bytes()),
        stripe_(StripeOf(request, size_)),
        offset_(request.offset()) {
    if (offset_ > size_) {
      FinishOnce(grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                              absl::StrCat("offset: ", offset_, " is beyond the end of ", name_,
                                           " (", size_, " bytes)")));
      return;
    }
    // Enqueue gets the job's latest event at once: it may have ended already.
    absl::Status watched = manager_.Watch(job_id_, this);
    if (!watched.ok()) {
      FinishOnce(transfer::ToGrpcStatus(watched));
      return;
    }
    Drive();
  }

  bool Enqueue(const pb::JobEvent& event) override {
    absl::MutexLock lock(&mu_);
    // RUNNING events are the write's progress; any other state is the job's end.
    if (ended_ || event.state() == pb::JOB_STATE_RUNNING) return false;
    ended_ = true;
    end_state_ = event.state();
    end_message_ = event.message();
    return TakeTokenLocked();
  }

  bool Close(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    if (ended_) return false;
    ended_ = true;
    end_message_ = status.ToString();
    return TakeTokenLocked();
  }

 private:
  // Sends the next chunk, waits (gives the token back), or ends the call.
  void Drive() override {
    bool ended = false, cancelled = false;
    pb::JobState end_state = pb::JOB_STATE_UNSPECIFIED;
    std::string end_message;
    const auto [begin, end] = stripe_.NextRange(offset_, kFetchChunkBytes);
    const bool last_chunk = stripe_.NextRange(end, kFetchChunkBytes).first >= size_;
    {
      absl::MutexLock lock(&mu_);
      cancelled = cancelled_;
      ended = ended_;
      end_state = end_state_;
      end_message = end_message_;
      if (!cancelled && !ended && last_chunk) {
        busy_ = false;  // the last chunk waits for the job's end
        return;
      }
    }
    if (cancelled) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "fetch cancelled"));
    } else if (!last_chunk) {
      SetChunk(begin, end);
      StartWrite(&message_);
    } else if (end_state == pb::JOB_STATE_SUCCEEDED) {
      SendLast();
    } else {
      FinishOnce(grpc::Status(grpc::StatusCode::ABORTED, EndedText(end_state, end_message)));
    }
  }

  // The job SUCCEEDED: its file is durable and its CRC-32 recorded.
  void SendLast() {
    absl::StatusOr<JobManager::ResultLocation> result = manager_.FindResult(job_id_, name_);
    if (!result.ok()) {
      FinishOnce(transfer::ToGrpcStatus(result.status()));
      return;
    }
    if (result->file.size_bytes() != size_) {
      FinishOnce(grpc::Status(grpc::StatusCode::DATA_LOSS,
                              absl::StrCat("result ", name_, " of job ", job_id_, " holds ",
                                           result->file.size_bytes(), " bytes, ", size_,
                                           " were being written")));
      return;
    }
    pb::FetchResultResponse last;
    last.set_last(true);
    last.set_total_bytes(size_);
    last.set_crc32(result->file.crc32());
    const auto [begin, end] = stripe_.NextRange(offset_, kFetchChunkBytes);
    SetChunk(begin, end, std::move(last));
    volume_.reset();  // the last message's slice holds it until sent
    if (metrics_ != nullptr) {
      metrics_->StageDone(TomodMetrics::Stage::kFetch, absl::ToDoubleSeconds(absl::Now() - start_));
    }
    {
      absl::MutexLock lock(&mu_);
      StopDrivingLocked();
    }
    StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
  }

  // message_ = fields with the bytes [begin, end) of the volume (a slice of it, which holds
  // the volume), offset_ = end (begin == end: an empty message at the end, as a fetch from
  // a file's end sends).
  void SetChunk(uint64_t begin, uint64_t end,
                pb::FetchResultResponse fields = pb::FetchResultResponse()) {
    if (sent_messages_++ == 0) fields.set_file_bytes(size_);
    fields.set_offset(begin);
    const std::string_view data(reinterpret_cast<const char*>(volume_->data()) + begin,
                                end - begin);
    if (metrics_ != nullptr && end > begin) metrics_->FetchBytes(end - begin);
    message_ = FetchMessage(fields, data, volume_);
    offset_ = end;
  }

  std::string EndedText(pb::JobState state, const std::string& message) const {
    absl::StatusOr<pb::Job> job = manager_.GetJob(job_id_);
    if (job.ok()) state = job->state();
    std::string why = job.ok() && !job->error().empty() ? job->error() : message;
    return absl::StrCat("job ", job_id_, " is ", ShortStateName(state),
                        why.empty() ? "" : absl::StrCat(": ", why), "; its result ", name_,
                        " was being written and is not its result: fetch it once the job has "
                        "SUCCEEDED");
  }

  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      StopDrivingLocked();
    }
    Finish(status);
  }

  TomodMetrics* metrics_;
  const std::string name_;
  const absl::Time start_ = absl::Now();
  std::shared_ptr<const core::Array3D> volume_;  // the token holder's, as the two below
  const uint64_t size_;
  const transfer::StripeLayout stripe_;
  uint64_t offset_;
  uint64_t sent_messages_ = 0;  // the first carries file_bytes
  grpc::ByteBuffer message_;    // the message being written
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  pb::JobState end_state_ ABSL_GUARDED_BY(mu_) = pb::JOB_STATE_UNSPECIFIED;
  std::string end_message_ ABSL_GUARDED_BY(mu_);
};

// A unary call on raw bytes: the caller authenticated (UNAUTHENTICATED), the request
// parsed (INVALID_ARGUMENT naming its type when it does not parse), handle(caller,
// request) -> the reply or an error, the reply serialised.
template <typename Request, typename Response, typename Handle>
grpc::ServerUnaryReactor* AnswerUnary(const Authenticator& authenticator,
                                      grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* raw_request,
                                      grpc::ByteBuffer* raw_response, Handle handle) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Principal> caller = authenticator.Authenticate(*context);
  if (!caller.ok()) {
    reactor->Finish(transfer::ToGrpcStatus(caller.status()));
    return reactor;
  }
  absl::StatusOr<Request> request = ParseMessage<Request>(*raw_request);
  absl::StatusOr<Response> response =
      request.ok() ? handle(*caller, *request) : absl::StatusOr<Response>(request.status());
  absl::Status status = response.status();
  if (status.ok()) status = SerializeMessage(*response, raw_response);
  reactor->Finish(transfer::ToGrpcStatus(status));
  return reactor;
}

// A client-streaming call refused before its first read (an unauthenticated Submit).
class RefusedReadReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  explicit RefusedReadReactor(const absl::Status& status) { Finish(transfer::ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

absl::Status ReconstructionService::CheckSees(const Principal& caller,
                                              absl::string_view job_id) const {
  if (caller.role == Role::kAdmin) return absl::OkStatus();
  absl::StatusOr<pb::Job> job = manager_.GetJob(job_id);
  if (!job.ok()) return job.status();
  if (!caller.SeesTenant(job->tenant())) {
    // Exactly what an unknown id gets: another tenant's job ids are not revealed.
    return absl::NotFoundError(absl::StrCat("job ", QuoteJobId(job_id), " not found"));
  }
  return absl::OkStatus();
}

grpc::ServerReadReactor<grpc::ByteBuffer>* ReconstructionService::Submit(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  absl::StatusOr<Principal> caller = authenticator_.Authenticate(*context);
  if (!caller.ok()) return new RefusedReadReactor(caller.status());
  return NewSubmitReactor(manager_, striped_uploads_, idle_uploads_, metrics_, context, response,
                          *caller);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* ReconstructionService::SubmitStripe(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  absl::StatusOr<Principal> caller = authenticator_.Authenticate(*context);
  if (!caller.ok()) return new RefusedReadReactor(caller.status());
  return NewSubmitStripeReactor(striped_uploads_, idle_uploads_, metrics_, context, response,
                                *caller);
}

grpc::ServerUnaryReactor* ReconstructionService::GetJob(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return AnswerUnary<pb::GetJobRequest, pb::Job>(
      authenticator_, context, request, response,
      [this](const Principal& caller, const pb::GetJobRequest& r) -> absl::StatusOr<pb::Job> {
        TOMO_RETURN_IF_ERROR(CheckSees(caller, r.job_id()));
        return manager_.GetJob(r.job_id());
      });
}

grpc::ServerUnaryReactor* ReconstructionService::ListJobs(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return AnswerUnary<pb::ListJobsRequest, pb::ListJobsResponse>(
      authenticator_, context, request, response,
      [this](const Principal& caller, const pb::ListJobsRequest& r) {
        return manager_.ListJobs(r, caller.role == Role::kAdmin
                                        ? std::nullopt
                                        : std::optional<std::string>(caller.tenant));
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ReconstructionService::WatchJob(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) {
  absl::StatusOr<Principal> caller = authenticator_.Authenticate(*context);
  if (!caller.ok()) return new WatchReactor(manager_, caller.status());
  absl::StatusOr<pb::WatchJobRequest> request = ParseMessage<pb::WatchJobRequest>(*raw_request);
  if (!request.ok()) return new WatchReactor(manager_, request.status());
  if (absl::Status sees = CheckSees(*caller, request->job_id()); !sees.ok()) {
    return new WatchReactor(manager_, sees);
  }
  return new WatchReactor(manager_, request->job_id());
}

grpc::ServerUnaryReactor* ReconstructionService::CancelJob(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return AnswerUnary<pb::CancelJobRequest, pb::Job>(
      authenticator_, context, request, response,
      [this](const Principal& caller, const pb::CancelJobRequest& r) -> absl::StatusOr<pb::Job> {
        TOMO_RETURN_IF_ERROR(CheckSees(caller, r.job_id()));
        return manager_.CancelJob(r.job_id());
      });
}

grpc::ServerUnaryReactor* ReconstructionService::DeleteJob(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return AnswerUnary<pb::DeleteJobRequest, pb::DeleteJobResponse>(
      authenticator_, context, request, response,
      [this](const Principal& caller,
             const pb::DeleteJobRequest& r) -> absl::StatusOr<pb::DeleteJobResponse> {
        TOMO_RETURN_IF_ERROR(CheckSees(caller, r.job_id()));
        TOMO_RETURN_IF_ERROR(manager_.DeleteJob(r.job_id()));
        return pb::DeleteJobResponse();
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ReconstructionService::FetchResult(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) {
  absl::StatusOr<Principal> caller = authenticator_.Authenticate(*context);
  if (!caller.ok()) return new FetchReactor(metrics_, pb::FetchResultRequest(), caller.status());
  absl::StatusOr<pb::FetchResultRequest> parsed =
      ParseMessage<pb::FetchResultRequest>(*raw_request);
  if (!parsed.ok()) {
    return new FetchReactor(metrics_, pb::FetchResultRequest(), parsed.status());
  }
  const pb::FetchResultRequest& request = *parsed;
  if (absl::Status stripe = CheckStripeFields(request); !stripe.ok()) {
    return new FetchReactor(metrics_, request, stripe);  // finishes with it at once
  }
  if (absl::Status sees = CheckSees(*caller, request.job_id()); !sees.ok()) {
    return new FetchReactor(metrics_, request, sees);
  }
  absl::StatusOr<JobManager::ResultLocation> result =
      manager_.FindResult(request.job_id(), request.name());
  if (result.ok() && result->being_written != nullptr) {
    return new EarlyFetchReactor(manager_, metrics_, request, std::move(*result));
  }
  return new FetchReactor(metrics_, request, std::move(result));
}

grpc::ServerUnaryReactor* ReconstructionService::GetServerInfo(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return AnswerUnary<pb::GetServerInfoRequest, pb::ServerInfo>(
      authenticator_, context, request, response,
      [this](const Principal&, const pb::GetServerInfoRequest&) { return ServerInfo(); });
}

pb::ServerInfo ReconstructionService::ServerInfo() const {
  pb::ServerInfo info;
  pb::ServerInfo* response = &info;
  response->set_version(core::TomoVersion());
  // Fresh free-memory figures for the devices that have workers.
  const std::vector<core::DeviceInfo> now = core::ListDevices();
  for (const core::DeviceInfo& device : manager_.devices()) {
    const core::DeviceInfo* current = &device;
    for (const core::DeviceInfo& d : now) {
      if (d.id == device.id) current = &d;
    }
    pb::Device* out = response->add_devices();
    out->set_id(current->id);
    out->set_name(current->name);
    out->set_memory_total_bytes(current->memory_total_bytes);
    out->set_memory_free_bytes(current->memory_free_bytes);
  }
  for (const std::string& name : registry_.Names()) response->add_algorithms(name);
  const ServerLimits& limits = manager_.limits();
  pb::Limits* out = response->mutable_limits();
  out->set_max_upload_bytes(limits.max_upload_bytes);
  out->set_max_voxels(limits.max_voxels);
  out->set_max_views(limits.max_views);
  out->set_max_queue_length(limits.max_queue_length);
  const JobManagerOptions& options = manager_.options();
  out->set_max_spool_bytes(options.max_spool_bytes);
  out->set_max_attempts(options.max_attempts);
  out->set_max_jobs_per_client(limits.max_jobs_per_client);
  out->set_max_iterations(limits.max_iterations);
  out->set_memory_budget_bytes(options.memory_budget_bytes);
  out->set_tenant_max_unfinished_jobs(options.tenant_max_unfinished_jobs);
  out->set_tenant_max_spool_bytes(options.tenant_max_spool_bytes);
  if (options.result_ttl > absl::ZeroDuration()) {
    const int64_t nanos = absl::ToInt64Nanoseconds(options.result_ttl);
    out->mutable_result_ttl()->set_seconds(nanos / 1000000000);
    out->mutable_result_ttl()->set_nanos(static_cast<int32_t>(nanos % 1000000000));
  }
  response->set_spool_used_bytes(manager_.spool_used_bytes());
  response->set_max_upload_streams(kMaxUploadStripes);
  return info;
}

}  // namespace tomo::server

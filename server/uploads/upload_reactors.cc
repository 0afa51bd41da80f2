#include "server/uploads/upload_reactors.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/status_macros.h"
#include "server/api/client_identity.h"
#include "transfer/grpc_status.h"
#include "server/telemetry/log.h"
#include "server/api/wire_message.h"

namespace tomo::server {

namespace pb = ::tomoserve::v1;

namespace {

// DEADLINE_EXCEEDED for an upload (what) whose client sent nothing for --upload_idle_timeout.
absl::Status IdleError(const std::string& what, uint64_t bytes) {
  return absl::DeadlineExceededError(absl::StrCat(
      what, " received no message for longer than --upload_idle_timeout after ", bytes,
      " bytes; the job is removed"));
}

class SubmitReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  SubmitReactor(JobManager& manager, StripedUploadRegistry& striped, IdleUploads& idle,
                TomodMetrics* metrics, grpc::CallbackServerContext* context,
                grpc::ByteBuffer* response, const Principal& caller)
      : manager_(manager), striped_uploads_(striped), idle_(idle), idle_entry_(idle.Register(context)),
        metrics_(metrics), context_(context), caller_(caller), response_(response) {
    ReadNext();
  }

  void OnReadDone(bool ok) override {
    idle_entry_->Busy();
    if (ok && end_received_) {
      // A message after upload_end: the commit that upload_end started sees this and
      // refuses the job (AfterUploadEnd), whatever the message was.
      absl::MutexLock lock(&after_end_mu_);
      message_after_end_ = true;
      return;
    }
    if (!ok && end_received_) return;  // the client's half-close after upload_end
    if (!ok) {
      // The stream ended (half-close or cancellation) before upload_end.
      absl::Status status;
      if (!upload_ && !striped_) {
        status = absl::InvalidArgumentError(
            "the Submit stream ended before its first message, the spec");
      } else {
        status = absl::InvalidArgumentError(absl::StrCat(
            "the upload of job ", JobId(), " ended after ", SentBytes(), " bytes",
            striped_ ? " of stripe 0" : "", " without upload_end; the job is removed"));
        if (idle_entry_->reaped()) {
          status = IdleError(absl::StrCat("the upload of job ", JobId()), SentBytes());
          Log(std::string(status.message()));
          Abort(status);
        } else {
          Abort(context_->IsCancelled() ? absl::CancelledError("the client cancelled") : status);
        }
      }
      Finish(transfer::ToGrpcStatus(status));
      return;
    }
    absl::StatusOr<pb::SubmitRequest> request = ParseMessage<pb::SubmitRequest>(raw_request_);
    raw_request_.Clear();
    absl::StatusOr<Next> next =
        request.ok() ? Handle(std::move(*request)) : absl::StatusOr<Next>(request.status());
    if (!next.ok()) {
      Abort(next.status());
      Finish(transfer::ToGrpcStatus(next.status()));
      return;
    }
    if (*next == Next::kRead) ReadNext();
  }

  void OnCancel() override {
    // A striped upload's other streams may be paused, waiting for this one.
    if (striped_) striped_->Abort(absl::CancelledError("the client cancelled the Submit call"));
  }

  void OnDone() override {
    if (striped_) striped_uploads_.Remove(striped_->job_id());
    idle_.Unregister(idle_entry_);
    delete this;  // ~Upload (~StripedUpload) removes an uncommitted job
  }

 private:
  // What the reactor does after a message: read the next one, or leave it to a callback
  // (the writer's on_room, or the commit that finishes the call).
  enum class Next { kRead, kCallback };

  const std::string& JobId() const { return striped_ ? striped_->job_id() : upload_->job_id(); }
  uint64_t SentBytes() const {
    return striped_ ? striped_->StripeBytesReceived(0) : upload_->received_bytes();
  }
  void Abort(const absl::Status& reason) {
    if (striped_) striped_->Abort(reason);
    if (upload_) upload_->Abort(reason);
  }
  // Waits for the client's next message (and counts towards --upload_idle_timeout).
  void ReadNext() {
    idle_entry_->Waiting();
    StartRead(&raw_request_);
  }

  // Checked by the commit just before the job becomes QUEUED.
  absl::Status AfterUploadEnd() {
    absl::MutexLock lock(&after_end_mu_);
    if (!message_after_end_) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "SubmitRequest: a message after upload_end; upload_end is the stream's last message");
  }

  void Finish(const grpc::Status& status) {
    if (status.ok()) {
      absl::Status serialized = SerializeMessage(response_message_, response_);
      if (!serialized.ok()) {
        grpc::ServerReadReactor<grpc::ByteBuffer>::Finish(transfer::ToGrpcStatus(serialized));
        return;
      }
    }
    grpc::ServerReadReactor<grpc::ByteBuffer>::Finish(status);
  }

  absl::StatusOr<Next> Handle(pb::SubmitRequest request) {
    request_ = std::move(request);
    if (request_.has_striping() && request_.part_case() != pb::SubmitRequest::kSpec) {
      return absl::InvalidArgumentError(
          "striping: set on a message without the spec; it goes with the spec");
    }
    switch (request_.part_case()) {
      case pb::SubmitRequest::kSpec:
        return Begin();
      case pb::SubmitRequest::kData: {
        if (!upload_ && !striped_) {
          return absl::InvalidArgumentError(
              "data: sent before spec; the first SubmitRequest must be the spec");
        }
        if (metrics_ != nullptr) metrics_->UploadBytes(request_.data().size());
        std::string data = std::move(*request_.mutable_data());
        TOMO_ASSIGN_OR_RETURN(const bool room,
                              striped_ ? striped_->Append(0, std::nullopt, std::move(data),
                                                          [this] { ReadNext(); })
                                       : upload_->Append(std::move(data)));
        return room ? Next::kRead : Next::kCallback;
      }
      case pb::SubmitRequest::kUploadEnd: {
        if (!upload_ && !striped_) {
          return absl::InvalidArgumentError(
              "upload_end: sent before spec; the first SubmitRequest must be the spec");
        }
        auto done = [this](absl::StatusOr<pb::Job> job) {
          if (job.ok()) {
            *response_message_.mutable_job() = std::move(*job);
            Finish(grpc::Status::OK);
          } else {
            Finish(transfer::ToGrpcStatus(job.status()));
          }
        };
        const pb::UploadEnd& end = request_.upload_end();
        end_received_ = true;
        // One more read: a message after upload_end is refused (AfterUploadEnd), the
        // client's half-close is fine; the commit does not wait for either (nor is the
        // stream idle while it commits).
        StartRead(&raw_request_);
        if (striped_) {
          striped_->CommitAsync(end.total_bytes(), end.crc32(), std::move(done),
                                [this] { return AfterUploadEnd(); });
        } else {
          upload_->CommitAsync(end.total_bytes(), end.crc32(), std::move(done),
                               [this] { return AfterUploadEnd(); });
        }
        return Next::kCallback;
      }
      case pb::SubmitRequest::PART_NOT_SET:
        break;
    }
    return absl::InvalidArgumentError(
        "SubmitRequest: no part set; expected one of spec, data, upload_end");
  }

  absl::StatusOr<Next> Begin() {
    if (upload_ || striped_) {
      return absl::InvalidArgumentError(
          "spec: sent twice; a Submit stream carries one spec, then data");
    }
    TOMO_ASSIGN_OR_RETURN(const UploadStripes stripes,
                          ValidateUploadStriping(request_.striping()));
    const std::string client = ClientIdentity(*context_, caller_);
    absl::StatusOr<std::unique_ptr<Upload>> upload =
        manager_.BeginUpload(request_.spec(), client, caller_.tenant);
    if (!upload.ok()) {
      if (metrics_ != nullptr) {
        metrics_->SubmitRefused(absl::StatusCodeToString(upload.status().code()));
      }
      return upload.status();
    }
    if ((*upload)->existing_job()) {
      // A retry of a Submit that was committed: answer now rather than take the data
      // again. The client sees its next Write fail and Finish return this reply.
      *response_message_.mutable_job() = *(*upload)->existing_job();
      upload_ = std::move(*upload);
      Finish(grpc::Status::OK);
      return Next::kCallback;
    }
    if (stripes.count > 1) {
      striped_ = std::make_shared<StripedUpload>(std::move(*upload), client, stripes);
      striped_uploads_.Add(striped_);
      Log(absl::StrCat("job ", striped_->job_id(), " upload striped over ", stripes.count,
                       " streams in units of ", stripes.unit_bytes, " bytes"));
      context_->AddInitialMetadata(kJobIdMetadataKey, striped_->job_id());
      StartSendInitialMetadata();
      return Next::kRead;
    }
    upload_ = std::move(*upload);
    upload_->SetOnRoom([this] { ReadNext(); });
    return Next::kRead;
  }

  JobManager& manager_;
  StripedUploadRegistry& striped_uploads_;
  IdleUploads& idle_;
  const std::shared_ptr<IdleUploads::Entry> idle_entry_;
  TomodMetrics* metrics_;
  grpc::CallbackServerContext* context_;
  const Principal caller_;
  grpc::ByteBuffer* response_;
  pb::SubmitResponse response_message_;
  grpc::ByteBuffer raw_request_;  // the message being read
  pb::SubmitRequest request_;     // the last message, parsed
  // Set on the gRPC thread that handled upload_end, before the read that may follow it.
  bool end_received_ = false;
  absl::Mutex after_end_mu_;
  bool message_after_end_ ABSL_GUARDED_BY(after_end_mu_) = false;
  // One of them once the spec is in: a one-stream upload, or stripe 0 of a striped one.
  std::unique_ptr<Upload> upload_;
  std::shared_ptr<StripedUpload> striped_;
};

class SubmitStripeReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  SubmitStripeReactor(StripedUploadRegistry& striped, IdleUploads& idle, TomodMetrics* metrics,
                      grpc::CallbackServerContext* context, grpc::ByteBuffer* response,
                      const Principal& caller)
      : striped_uploads_(striped), idle_(idle), idle_entry_(idle.Register(context)),
        metrics_(metrics), context_(context), response_(response), caller_(caller) {
    ReadNext();
  }

  void OnReadDone(bool ok) override {
    idle_entry_->Busy();
    if (!ok) {
      absl::Status status;
      if (!upload_) {
        status = absl::InvalidArgumentError(
            "the SubmitStripe stream ended before its first message, open");
      } else if (idle_entry_->reaped()) {
        status = IdleError(absl::StrCat("stripe ", index_, " of job ", upload_->job_id()),
                           upload_->StripeBytesReceived(index_));
        Log(std::string(status.message()));
        upload_->Abort(status);
      } else if (context_->IsCancelled()) {
        status = CancelledByClient();
        upload_->Abort(status);
      } else {
        status = upload_->EndStripe(index_);
        pb::SubmitStripeResponse response;
        response.set_received_bytes(upload_->StripeBytesReceived(index_));
        if (status.ok()) status = SerializeMessage(response, response_);
      }
      Finish(transfer::ToGrpcStatus(status));
      return;
    }
    absl::StatusOr<pb::SubmitStripeRequest> request =
        ParseMessage<pb::SubmitStripeRequest>(raw_request_);
    raw_request_.Clear();
    if (request.ok()) request_ = std::move(*request);
    absl::StatusOr<bool> read_now = request.ok() ? Handle() : absl::StatusOr<bool>(request.status());
    if (!read_now.ok()) {
      if (upload_) upload_->Abort(read_now.status());
      Finish(transfer::ToGrpcStatus(read_now.status()));
      return;
    }
    if (*read_now) ReadNext();
  }

  void OnCancel() override {
    if (upload_) upload_->Abort(CancelledByClient());
  }

  void OnDone() override {
    idle_.Unregister(idle_entry_);
    delete this;
  }

 private:
  // Waits for the client's next message (and counts towards --upload_idle_timeout).
  void ReadNext() {
    idle_entry_->Waiting();
    StartRead(&raw_request_);
  }
  absl::Status CancelledByClient() const {
    return absl::CancelledError(absl::StrCat("the client cancelled stripe ", index_, " of job ",
                                             upload_->job_id(), "'s upload"));
  }

  absl::StatusOr<bool> Handle() {
    switch (request_.part_case()) {
      case pb::SubmitStripeRequest::kOpen: {
        if (upload_) {
          return absl::InvalidArgumentError(
              "open: sent twice; a SubmitStripe stream carries one open, then data");
        }
        TOMO_ASSIGN_OR_RETURN(
            std::shared_ptr<StripedUpload> upload,
            striped_uploads_.Find(request_.open().job_id(), ClientIdentity(*context_, caller_)));
        // Not set before the stripe is ours: a bad open must not abort someone's upload.
        TOMO_RETURN_IF_ERROR(upload->Open(request_.open().stripe_index()));
        index_ = request_.open().stripe_index();
        upload_ = std::move(upload);
        return true;
      }
      case pb::SubmitStripeRequest::kData: {
        if (!upload_) {
          return absl::InvalidArgumentError(
              "data: sent before open; the first SubmitStripeRequest must be open");
        }
        if (metrics_ != nullptr) metrics_->UploadBytes(request_.data().data().size());
        return upload_->Append(index_, request_.data().offset(),
                               std::move(*request_.mutable_data()->mutable_data()),
                               [this] { ReadNext(); });
      }
      case pb::SubmitStripeRequest::PART_NOT_SET:
        break;
    }
    return absl::InvalidArgumentError(
        "SubmitStripeRequest: no part set; expected one of open, data");
  }

  StripedUploadRegistry& striped_uploads_;
  IdleUploads& idle_;
  const std::shared_ptr<IdleUploads::Entry> idle_entry_;
  TomodMetrics* metrics_;
  grpc::CallbackServerContext* context_;
  grpc::ByteBuffer* response_;
  const Principal caller_;
  grpc::ByteBuffer raw_request_;    // the message being read
  pb::SubmitStripeRequest request_;  // the last message, parsed
  std::shared_ptr<StripedUpload> upload_;  // once open
  uint32_t index_ = 0;
};

}  // namespace

grpc::ServerReadReactor<grpc::ByteBuffer>* NewSubmitReactor(
    JobManager& manager, StripedUploadRegistry& striped, IdleUploads& idle, TomodMetrics* metrics,
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response, const Principal& caller) {
  return new SubmitReactor(manager, striped, idle, metrics, context, response, caller);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* NewSubmitStripeReactor(
    StripedUploadRegistry& striped, IdleUploads& idle, TomodMetrics* metrics,
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response, const Principal& caller) {
  return new SubmitStripeReactor(striped, idle, metrics, context, response, caller);
}

}  // namespace tomo::server

// ReconstructionService: tomoserve.v1.Reconstruction on gRPC's callback API, a thin layer
// that maps the wire onto JobManager (job_manager.h) and absl::Status onto gRPC codes.
//
//   Submit       ServerReadReactors (upload_reactors.h): spec, data chunks straight to
//   SubmitStripe the spool file's writer, upload_end -> QUEUED -> reply; a striped upload's
//                stripes 1..N-1 on SubmitStripe calls (striped_upload.h).
//   WatchJob     ServerWriteReactor and JobWatcher: current state, then every event until
//                a terminal state; no thread per watcher (writes chained by OnWriteDone).
//   FetchResult  ServerWriteReactor: 1 MiB chunks from the offset; the last message has
//                last=true, total_bytes and the CRC-32 of the whole file. The raw result
//                of a job whose outputs are being written streams from the volume in
//                memory and ends only when the job does (early fetch, job_manager.h):
//                SUCCEEDED gives that last message, any other end ABORTED. Either may be
//                striped (FetchResultRequest.stripe_*): the stripe's units only, each
//                stripe ending with the same last message.
//                FetchReactor reads through transfer::ChunkReader, striped alike, from
//                the file's mapping. The method is raw (ByteBuffer in and out): each
//                message's bytes go to gRPC as a slice of the file's mapping or of the
//                volume in memory, never copied into the message (fetch_message.h).
//   others       unary, answered at once (ServerUnaryReactor).
// Every method takes its request as bytes and parses it itself (wire_message.h): a
// request that does not parse is INVALID_ARGUMENT naming its message type.
//
// Every method first authenticates its caller (security/authenticator.h): UNAUTHENTICATED
// when tomod has tokens or client certificates and the call is not one of them. A caller
// that is not an admin sees only its tenant's jobs: GetJob, WatchJob, FetchResult,
// CancelJob and DeleteJob of another tenant's job are NOT_FOUND exactly as an unknown id,
// and ListJobs leaves them out; Submit makes the job the caller's tenant's.
//
// The service's only state is the registry of striped uploads in progress, for SubmitStripe
// calls to find; it must not outlive the manager and registry.
//
//   ReconstructionService service(manager, registry);
//   builder.RegisterService(&service);
#pragma once

#include "core/algorithms/reconstruction.h"
#include "server/jobs/job_manager.h"
#include "server/security/authenticator.h"
#include "server/uploads/idle_uploads.h"
#include "server/uploads/striped_upload.h"
#include "server/telemetry/tomod_metrics.h"
#include "tomoserve/v1/tomoserve.grpc.pb.h"

namespace tomo::server {

// Largest data field FetchResult sends, and the chunk size clients are advised to upload.
inline constexpr size_t kFetchChunkBytes = 1 << 20;
// FetchResultRequest's stripe fields: most streams of one striped fetch, and the unit.
inline constexpr uint32_t kMaxFetchStripes = 64;
inline constexpr uint64_t kMinFetchStripeBytes = 4 << 10;
inline constexpr uint64_t kMaxFetchStripeBytes = 8 << 20;
inline constexpr uint64_t kDefaultFetchStripeBytes = 1 << 20;  // for stripe_bytes 0

// Every method is raw (ByteBuffer in and out; wire_message.h): tomod parses each request
// itself, so that bytes that do not parse are INVALID_ARGUMENT naming the message type on
// every method; FetchResult also builds its replies in their wire form (fetch_message.h).
namespace raw_service {
namespace v1 = ::tomoserve::v1;
using Base = v1::Reconstruction::WithRawCallbackMethod_Submit<
    v1::Reconstruction::WithRawCallbackMethod_SubmitStripe<
        v1::Reconstruction::WithRawCallbackMethod_GetJob<
            v1::Reconstruction::WithRawCallbackMethod_ListJobs<
                v1::Reconstruction::WithRawCallbackMethod_WatchJob<
                    v1::Reconstruction::WithRawCallbackMethod_CancelJob<
                        v1::Reconstruction::WithRawCallbackMethod_DeleteJob<
                            v1::Reconstruction::WithRawCallbackMethod_FetchResult<
                                v1::Reconstruction::WithRawCallbackMethod_GetServerInfo<
                                    v1::Reconstruction::CallbackService>>>>>>>>>;
}  // namespace raw_service
using ReconstructionServiceBase = raw_service::Base;

class ReconstructionService final : public ReconstructionServiceBase {
 public:
  // metrics: where upload/fetch bytes, fetch durations and refused Submits are counted;
  // null: nowhere.
  // authenticator: who each call comes from (security/authenticator.h); the default one
  // authenticates nobody and every call is the default tenant, as admin.
  ReconstructionService(JobManager& manager, const core::AlgorithmRegistry& registry,
                        TomodMetrics* metrics = nullptr, Authenticator authenticator = {})
      : manager_(manager), registry_(registry), metrics_(metrics),
        authenticator_(authenticator),
        idle_uploads_(manager.options().upload_idle_timeout) {}

  // Requests: the method's request message; replies: its response message (JobEvent for
  // WatchJob, FetchResultResponse for FetchResult), each as bytes.
  grpc::ServerReadReactor<grpc::ByteBuffer>* Submit(grpc::CallbackServerContext* context,
                                                    grpc::ByteBuffer* response) override;
  grpc::ServerReadReactor<grpc::ByteBuffer>* SubmitStripe(grpc::CallbackServerContext* context,
                                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchJob(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* DeleteJob(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* FetchResult(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;

 private:
  tomoserve::v1::ServerInfo ServerInfo() const;
  // OK when caller may see job_id (its tenant's, or an admin); NOT_FOUND with the message
  // an unknown id gets otherwise, and for an unknown id.
  absl::Status CheckSees(const Principal& caller, absl::string_view job_id) const;

  JobManager& manager_;
  const core::AlgorithmRegistry& registry_;
  TomodMetrics* metrics_;
  const Authenticator authenticator_;
  StripedUploadRegistry striped_uploads_;
  // Ends uploads whose client went silent (--upload_idle_timeout).
  IdleUploads idle_uploads_;
};

}  // namespace tomo::server

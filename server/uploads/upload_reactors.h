// The two upload calls of tomoserve.v1.Reconstruction, as gRPC callback reactors
// (ReconstructionService hands them out):
//
//   Submit        spec first (validated before any data is stored, the caller counted
//                 against --max_jobs_per_client as ClientIdentity names it, the job
//                 owned by the caller's tenant), data chunks
//                 straight to the spool file's writer, upload_end -> fsync, QUEUED -> reply.
//                 With SubmitRequest.striping the call carries stripe 0 of a striped upload
//                 (StripedUpload): tomod sends the job id in the initial metadata
//                 (kJobIdMetadataKey) and commits only after every stripe has ended.
//   SubmitStripe  one more stripe of such an upload: open (job id and stripe; only the
//                 client that began it may open it), then the stripe's units; the call
//                 ends OK when all have arrived.
//
// Any failure, a stream that ends early, a client cancel or a client silent for longer than
// --upload_idle_timeout while tomod waits for its next message (IdleUploads) remove the job
// (every stripe's call then fails too). The stream's thread only queues data; when the writer's queue is
// full (or a stripe runs too far ahead) the next read waits for a callback, and the final
// fsync and commit run on the writer's thread, which then finishes the Submit call.
#pragma once

#include "server/jobs/job_manager.h"
#include "server/security/principal.h"
#include "server/uploads/idle_uploads.h"
#include "server/uploads/striped_upload.h"
#include "server/telemetry/tomod_metrics.h"
#include "tomoserve/v1/tomoserve.grpc.pb.h"

namespace tomo::server {

// The initial-metadata key under which a striped Submit call learns its job's id.
inline constexpr char kJobIdMetadataKey[] = "tomo-job-id";

// metrics may be null. The reactors delete themselves when their call is done. They read
// each message as bytes and parse it themselves (wire_message.h): a message that does not
// parse is INVALID_ARGUMENT naming SubmitRequest / SubmitStripeRequest and removes the
// job; so is any message after upload_end (the call then ends without a job). response
// receives the SubmitResponse / SubmitStripeResponse bytes. caller: who the call was
// authenticated as (security/authenticator.h).
grpc::ServerReadReactor<grpc::ByteBuffer>* NewSubmitReactor(
    JobManager& manager, StripedUploadRegistry& striped, IdleUploads& idle, TomodMetrics* metrics,
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response, const Principal& caller);
grpc::ServerReadReactor<grpc::ByteBuffer>* NewSubmitStripeReactor(
    StripedUploadRegistry& striped, IdleUploads& idle, TomodMetrics* metrics,
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response, const Principal& caller);

}  // namespace tomo::server

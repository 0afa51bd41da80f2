// TomoClient: the C++ client of tomod, one object per server, speaking the
// tomoserve.v1.Reconstruction service (proto/tomoserve/v1/tomoserve.proto).
//
// What it does for each RPC:
//   Submit   streams the JobSpec, then the data file(s) in 1 MiB chunks, then an UploadEnd
//            with the byte total and the zlib CRC-32 of every byte sent. It returns only
//            when tomod has stored the data and the job is QUEUED. With a
//            spec.idempotency_key that tomod knows, it returns that job (tomod answers
//            before the data, which is then not sent): the same key makes a retry safe. When the spec's
//            input.size_bytes is 0 it is filled from the files' total size; when it is set
//            and differs, nothing is sent (INVALID_ARGUMENT naming input.size_bytes).
//            With ClientOptions::upload_streams = N > 1 (automatic: 3) an input of
//            striped_upload_min_bytes or more goes as a striped upload
//            (client/striped_submit.cc): N streams on N connections, each carrying every
//            N-th MiB, if tomod takes them (ServerInfo.max_upload_streams, asked once).
//   Watch    calls on_event for every JobEvent until the server closes the stream (the
//            job ended: OK) or the stream breaks (its status).
//   Fetch    downloads one result into `output_path + ".partial"`, resuming from that
//            file's size when it exists and resume is true, checks the size and CRC-32 of
//            the whole file against the server's final message, fsyncs and renames it to
//            output_path. On a checksum mismatch the partial file is removed (DATA_LOSS);
//            on a broken stream it is kept, so the next Fetch resumes. A raw result that
//            tomod is still writing streams from its memory and ends only when the job
//            does: ABORTED when the job did not succeed, the partial file then removed.
//            With ClientOptions::download_streams = N > 1 (automatic: 3 into tmpfs, else 1)
//            the download runs as N striped FetchResult calls (FetchResultRequest.stripe_*,
//            units of 1 MiB), stream 0 on the client's channel and the others on channels
//            of their own (separate TCP connections, made on the first such fetch and
//            kept): each thread pwrites its
//            units into the partial file; the units' CRC-32s are combined in file order and
//            every byte is checked to have come once. When a stream fails the others are
//            cancelled and the partial file is cut to the longest prefix that arrived, so
//            that the next Fetch resumes from there.
//            A TomoClient made from a channel runs the N streams on that one channel.
//            A large download (ClientOptions::mapped_download_min_bytes, the size known
//            from the first message's file_bytes) into tmpfs is copied into the partial
//            file through a shared mapping by several threads (transfer::MappedFileWriter):
//            tmpfs serialises one file's write()s, so one writer thread is the limit there.
//   WatchAndFetch  Watch, and Fetch of one result started as soon as tomod writes it (on
//            the "write results" progress event), so that the download overlaps the
//            writing of the file: the job's end and the verified file.
//   ListJobs follows next_page_token until the last page.
//
// Channel: insecure credentials unless ClientOptions::credentials is set (TLS and mutual
// TLS: channel_security.h), every call with ClientOptions::bearer_token when set (the
// striped transfers' extra channels too), max send/receive message size set explicitly
// (16 MiB by default). Unary calls carry a deadline (ClientOptions::unary_timeout); streams
// do not. A TomoClient made from a channel uses that channel as it is (its own
// credentials and interceptors); ClientOptions::bearer_token then applies to the extra
// channels only, which it does not make.
//
// Errors: a failed RPC's grpc::Status becomes an absl::Status with the same code and
// message (UNAVAILABLE: tomod cannot be reached; NOT_FOUND: unknown job or result;
// INVALID_ARGUMENT: a spec or data tomod refuses, the message naming the field;
// FAILED_PRECONDITION: the job's state forbids it; RESOURCE_EXHAUSTED: a server limit).
// Local file problems: NOT_FOUND or INTERNAL naming the path; DATA_LOSS for a download or
// upload whose bytes are not what they should be.
//
// Thread safety: a TomoClient may be used from several threads at once (the channel is
// shared, each call has its own context). Callbacks run on the calling thread.
//
// Example:
//   tomo::client::TomoClient client("127.0.0.1:50051");
//   absl::StatusOr<tomoserve::v1::JobSpec> spec = tomo::client::ReadJobSpecFile("job.json");
//   if (!spec.ok()) return spec.status();
//   absl::StatusOr<tomoserve::v1::Job> job = client.Submit(*spec, {"sinogram.raw"});
//   if (!job.ok()) return job.status();
//   absl::Status watched = client.Watch(job->id(), [](const tomoserve::v1::JobEvent& e) {
//     std::cout << e.progress().fraction() << " " << e.progress().stage() << "\n";
//   });
//   absl::StatusOr<tomoserve::v1::ResultFile> file =
//       client.Fetch(job->id(), "volume.raw", "out/volume.raw");
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "transfer/crc32.h"
#include "transfer/grpc_status.h"
#include "tomoserve/v1/tomoserve.grpc.pb.h"

namespace tomo::client {

struct ClientOptions {
  // Max size of one gRPC message, both directions. Data chunks are 1 MiB, so 16 MiB
  // leaves room for any spec or job listing.
  int max_message_bytes = 16 << 20;
  // Deadline of each unary call (GetJob, ListJobs pages, Cancel, Delete, GetServerInfo).
  absl::Duration unary_timeout = absl::Seconds(60);
  // Null: insecure channel credentials (plain text: tomod on loopback). TLS:
  // MakeChannelCredentials (channel_security.h).
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Non-empty: every call carries `authorization: Bearer <token>` metadata (tomod's
  // --tokens_file). Over plain text only to a loopback tomod, as the credentials allow.
  std::string bearer_token;
  // Fetch as this many striped streams, each on its own connection, [0, 16]. 0 (the
  // default) is automatic: kAutomaticTransferStreams when the file goes to tmpfs, where the
  // mapped writer takes the data faster than one stream brings it (2.6-3.0 against 2.3
  // GB/s on the H100 machine's loopback, bench/NOTES.md v0.11), else 1: a disk file's
  // writes serialise, and more streams only contend for them (v0.10).
  int download_streams = 0;
  // Submit as this many striped streams (SubmitRequest.striping), each on its own
  // connection, [0, 16]; a tomod that takes fewer (ServerInfo.max_upload_streams) gets as
  // many as it takes. 0 (the default) is automatic: kAutomaticTransferStreams. One gRPC
  // stream holds an upload near 2.1-2.6 GB/s on loopback, 2-3 streams gave 2.7-3.2 GB/s
  // (bench/NOTES.md v0.11).
  int upload_streams = 0;
  // Inputs smaller than this go on one stream whatever upload_streams says: below a few
  // units the streams' set-up costs more than it saves.
  uint64_t striped_upload_min_bytes = uint64_t{64} << 20;
  // Fetch writes a file of at least this many bytes on tmpfs through a shared mapping
  // copied by several threads (transfer::MappedFileWriter), rather than by one writer
  // thread (one stream) or pwrite (striped); 0 for every size. Never for a tomod that does
  // not announce the size (FetchResultResponse.file_bytes) nor off tmpfs.
  uint64_t mapped_download_min_bytes = uint64_t{64} << 20;
};

// Most streams of one Fetch (ClientOptions::download_streams) and the stripe unit it asks
// for.
inline constexpr int kMaxDownloadStreams = 16;
// Most streams of one Submit (ClientOptions::upload_streams).
inline constexpr int kMaxUploadStreams = 16;
// Streams of a large transfer when ClientOptions leave the count automatic (0).
inline constexpr int kAutomaticTransferStreams = 3;
inline constexpr uint64_t kDownloadStripeBytes = 1 << 20;

// Bytes done and the total, for uploads and downloads.
using ByteProgressFn = std::function<void(uint64_t done_bytes, uint64_t total_bytes)>;
using JobEventFn = std::function<void(const tomoserve::v1::JobEvent& event)>;

// Size of one data chunk in Submit.
inline constexpr size_t kUploadChunkBytes = 1 << 20;

// The progress stage in which tomod writes a job's outputs (its raw result can be fetched
// from then on).
inline constexpr char kWriteResultsStage[] = "write results";

// What WatchAndFetch returns.
struct WatchedFetch {
  // The job as it ended (GetJob after its last event): state, error, results.
  tomoserve::v1::Job job;
  // Set when the job SUCCEEDED: the downloaded file, checked, as Fetch returns it.
  std::optional<tomoserve::v1::ResultFile> file;
  // The fetch started while the job was RUNNING (on its "write results" event), not after
  // SUCCEEDED.
  bool started_early = false;
};

class TomoClient {
 public:
  // target: "host:port" as gRPC takes it, e.g. "127.0.0.1:50051". The channel connects
  // lazily: a server that is down shows up as UNAVAILABLE on the first call.
  explicit TomoClient(std::string target, ClientOptions options = {});
  // For tests and embedding: a channel made by the caller.
  explicit TomoClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options = {});

  TomoClient(const TomoClient&) = delete;
  TomoClient& operator=(const TomoClient&) = delete;

  const std::string& target() const { return target_; }

  // Uploads the concatenation of data_paths as the job's input. on_progress is called
  // after each chunk (and once with 0 before the first).
  absl::StatusOr<tomoserve::v1::Job> Submit(const tomoserve::v1::JobSpec& spec,
                                            const std::vector<std::string>& data_paths,
                                            const ByteProgressFn& on_progress = {});
  absl::StatusOr<tomoserve::v1::Job> GetJob(const std::string& job_id);
  // Jobs in any of `states` (all when empty), oldest first, every page.
  absl::StatusOr<std::vector<tomoserve::v1::Job>> ListJobs(
      const std::vector<tomoserve::v1::JobState>& states = {});
  absl::Status Watch(const std::string& job_id, const JobEventFn& on_event);
  absl::StatusOr<tomoserve::v1::Job> Cancel(const std::string& job_id);
  absl::Status Delete(const std::string& job_id);
  // result_name empty: the job's first result. Returns result_name and the downloaded
  // file's size and CRC-32 (format is left unset).
  absl::StatusOr<tomoserve::v1::ResultFile> Fetch(const std::string& job_id,
                                                  const std::string& result_name,
                                                  const std::string& output_path,
                                                  bool resume = true,
                                                  const ByteProgressFn& on_progress = {});
  // Watches job_id (on_event gets every event, as Watch) and fetches result_name into
  // output_path (as Fetch) on another thread, started on the job's RUNNING event with
  // stage kWriteResultsStage or on SUCCEEDED, whichever comes first. Returns once both
  // have ended. A job that ends FAILED or CANCELLED is no error: the result has the job
  // (its error in job.error()) and no file, and the partial download is removed. Errors:
  // the watch's (e.g. UNAVAILABLE: tomod stopped), GetJob's, and for a job that
  // SUCCEEDED, the fetch's (DATA_LOSS: bytes not as recorded). result_name: any result;
  // only tomod's raw result (volume.raw, or empty when it is the first) streams early:
  // tomod refuses an early fetch of the others (FAILED_PRECONDITION), which are then
  // fetched after SUCCEEDED. on_event runs on the calling thread, on_progress on the
  // fetch's.
  absl::StatusOr<WatchedFetch> WatchAndFetch(const std::string& job_id,
                                             const std::string& result_name,
                                             const std::string& output_path,
                                             const JobEventFn& on_event = {},
                                             bool resume = true,
                                             const ByteProgressFn& on_progress = {});
  absl::StatusOr<tomoserve::v1::ServerInfo> GetServerInfo();

  // Fetch calls (one stream or striped) that wrote through a shared mapping so far.
  uint64_t mapped_fetches() const { return mapped_fetches_.load(); }

  // The generated stub, for what this class does not wrap.
  tomoserve::v1::Reconstruction::Stub& stub() { return *stub_; }

 private:
  void SetUnaryDeadline(grpc::ClientContext& context) const;
  absl::StatusOr<tomoserve::v1::ResultFile> FetchOnce(const std::string& job_id,
                                                      const std::string& result_name,
                                                      const std::string& output_path,
                                                      bool resume,
                                                      const ByteProgressFn& on_progress,
                                                      bool* offset_refused);
  // How many streams a Fetch into output_path uses: options_.download_streams, or when
  // that is automatic, kAutomaticTransferStreams on tmpfs and 1 elsewhere.
  int DownloadStreams(const std::string& output_path) const;
  // FetchOnce as `streams` striped streams.
  absl::StatusOr<tomoserve::v1::ResultFile> FetchStriped(const std::string& job_id,
                                                         const std::string& result_name,
                                                         const std::string& output_path,
                                                         int streams, bool resume,
                                                         const ByteProgressFn& on_progress,
                                                         bool* offset_refused);
  // The stubs of streams 0..n-1 of a striped transfer (stub_ first), made once.
  std::vector<tomoserve::v1::Reconstruction::Stub*> DownloadStubs(int n);
  // Their channels (channel_ first).
  std::vector<grpc::Channel*> DownloadChannels(int n);
  // How many streams a Submit of total_bytes uses: options_.upload_streams (automatic:
  // kAutomaticTransferStreams), at most what tomod takes (asked once) and one per unit; 1
  // for small inputs.
  uint32_t UploadStreams(uint64_t total_bytes);
  // Submit over `streams` striped streams (client/striped_submit.cc); spec has the input's
  // size, file_bytes the data files' sizes.
  absl::StatusOr<tomoserve::v1::Job> SubmitStriped(const tomoserve::v1::JobSpec& spec,
                                                   const std::vector<std::string>& data_paths,
                                                   const std::vector<uint64_t>& file_bytes,
                                                   uint32_t streams,
                                                   const ByteProgressFn& on_progress);

  std::string target_;
  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<tomoserve::v1::Reconstruction::Stub> stub_;
  bool own_channel_ = false;  // made from target_ (else given: no more channels are made)
  std::mutex download_mu_;
  // Channels and stubs of streams 1, 2, ... of striped fetches.
  std::vector<std::shared_ptr<grpc::Channel>> download_channels_;
  std::vector<std::unique_ptr<tomoserve::v1::Reconstruction::Stub>> download_stubs_;
  // ServerInfo.max_upload_streams, once asked (under download_mu_).
  std::optional<uint32_t> server_upload_streams_;
  std::atomic<uint64_t> mapped_fetches_{0};
};

// The channel TomoClient makes for a target: credentials and message sizes from options.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const ClientOptions& options);

// The end of a Submit call that tomod closed early (a Write failed, or no job id came for a
// striped one): its error, or the job of a known idempotency key, which tomod answers with
// at once.
absl::StatusOr<tomoserve::v1::Job> FinishEndedSubmit(
    grpc::ClientWriter<tomoserve::v1::SubmitRequest>& writer,
    const tomoserve::v1::SubmitResponse& response);

// grpc::Status -> absl::Status with the same code and message (transfer/grpc_status.h).
using transfer::FromGrpcStatus;

// zlib CRC-32 (IEEE) of a whole file. NOT_FOUND, PERMISSION_DENIED, INVALID_ARGUMENT (not a
// regular file) or DATA_LOSS naming the path.
absl::StatusOr<uint32_t> FileCrc32(const std::string& path);
// Continues a CRC-32: Crc32Update(0, bytes) is the CRC of bytes (the wire contract's,
// transfer/crc32.h).
using transfer::Crc32Update;

// "JOB_STATE_RUNNING" -> "RUNNING"; lower case with lower = true.
std::string JobStateName(tomoserve::v1::JobState state, bool lower = false);
// "running", "RUNNING", "job_state_running" -> JOB_STATE_RUNNING; INVALID_ARGUMENT naming
// the known states otherwise.
absl::StatusOr<tomoserve::v1::JobState> ParseJobState(const std::string& text);
// True for SUCCEEDED, FAILED and CANCELLED.
bool IsFinal(tomoserve::v1::JobState state);

}  // namespace tomo::client

#include "client/tomo_client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "proto/transfer/chunk_reader.h"
#include "proto/transfer/chunk_writer.h"
#include "proto/transfer/crc32.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tomo::client {
namespace {

namespace v1 = ::tomoserve::v1;

absl::Status ErrnoStatus(int error, const std::string& what, const std::string& path) {
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

// A file descriptor closed on destruction.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Hands the descriptor over; this object then holds none.
  int Release() { return std::exchange(fd_, -1); }
  // close() with its error, for files written.
  int Close() {
    int rc = fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

std::string DisplayPaths(const std::vector<std::string>& paths) {
  return paths.size() == 1 ? paths[0] : absl::StrCat("[", absl::StrJoin(paths, ", "), "]");
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share their numeric values (both are the
  // canonical google.rpc.Code).
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

absl::StatusOr<uint32_t> FileCrc32(const std::string& path) {
  // Read ahead and checksummed in chunks on the reader's threads, then combined in order.
  absl::StatusOr<std::unique_ptr<transfer::ChunkReader>> reader =
      transfer::ChunkReader::Open({path}, 0, {});
  if (!reader.ok()) return reader.status();
  uint32_t crc = 0;  // of nothing yet: combining it with B gives B's
  for (;;) {
    absl::StatusOr<std::optional<transfer::ChunkReader::Chunk>> chunk = (*reader)->Next();
    if (!chunk.ok()) return chunk.status();
    if (!chunk->has_value()) return crc;
    crc = transfer::Crc32Combine(crc, (*chunk)->crc32, (*chunk)->bytes.size());
  }
}

std::string JobStateName(v1::JobState state, bool lower) {
  std::string name = v1::JobState_Name(state);
  if (absl::StartsWith(name, "JOB_STATE_")) name = name.substr(10);
  if (name.empty()) name = absl::StrCat("STATE_", static_cast<int>(state));
  return lower ? absl::AsciiStrToLower(name) : name;
}

absl::StatusOr<v1::JobState> ParseJobState(const std::string& text) {
  std::string upper = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  if (!absl::StartsWith(upper, "JOB_STATE_")) upper = absl::StrCat("JOB_STATE_", upper);
  v1::JobState state;
  if (upper != "JOB_STATE_UNSPECIFIED" && v1::JobState_Parse(upper, &state)) return state;
  std::vector<std::string> known;
  for (int i = v1::JobState_MIN; i <= v1::JobState_MAX; ++i) {
    if (v1::JobState_IsValid(i) && i != v1::JOB_STATE_UNSPECIFIED) {
      known.push_back(JobStateName(static_cast<v1::JobState>(i), /*lower=*/true));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown job state \"", text,
                                                 "\"; known: ", absl::StrJoin(known, ", ")));
}

bool IsFinal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      options.credentials ? options.credentials : grpc::InsecureChannelCredentials();
  return grpc::CreateCustomChannel(target, credentials, args);
}

TomoClient::TomoClient(std::string target, ClientOptions options)
    : target_(std::move(target)), options_(std::move(options)) {
  channel_ = MakeChannel(target_, options_);
  stub_ = v1::Reconstruction::NewStub(channel_);
}

TomoClient::TomoClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : target_("(channel)"), options_(std::move(options)), channel_(std::move(channel)) {
  stub_ = v1::Reconstruction::NewStub(channel_);
}

void TomoClient::SetUnaryDeadline(grpc::ClientContext& context) const {
  if (options_.unary_timeout > absl::ZeroDuration() &&
      options_.unary_timeout != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.unary_timeout));
  }
}

absl::StatusOr<v1::Job> TomoClient::Submit(const v1::JobSpec& spec,
                                           const std::vector<std::string>& data_paths,
                                           const ByteProgressFn& on_progress) {
  if (data_paths.empty()) {
    return absl::InvalidArgumentError("no data file given for the job's input");
  }
  // Sizes first, so that a spec that does not match the files sends nothing.
  uint64_t total = 0;
  for (const std::string& path : data_paths) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "cannot open", path);
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
    }
    total += static_cast<uint64_t>(st.st_size);
  }
  v1::JobSpec sent_spec = spec;
  if (sent_spec.input().size_bytes() == 0) {
    sent_spec.mutable_input()->set_size_bytes(total);
  } else if (sent_spec.input().size_bytes() != total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input.size_bytes: ", sent_spec.input().size_bytes(), " does not match the data: ",
        DisplayPaths(data_paths), " holds ", total, " bytes"));
  }

  grpc::ClientContext context;
  v1::SubmitResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::SubmitRequest>> writer =
      stub_->Submit(&context, &response);
  // When a Write fails the server has ended the call: Finish() says why.
  auto finish_with_server_status = [&]() -> absl::StatusOr<v1::Job> {
    grpc::Status status = writer->Finish();
    if (!status.ok()) return FromGrpcStatus(status);
    // tomod answers right after the spec, without the data, when spec.idempotency_key
    // names a job it has: that job is the reply.
    if (!response.job().id().empty()) return response.job();
    return absl::UnavailableError("tomod closed the upload early without an error");
  };

  v1::SubmitRequest request;
  *request.mutable_spec() = sent_spec;
  if (!writer->Write(request)) return finish_with_server_status();
  if (on_progress) on_progress(0, total);

  // Reader threads read and checksum the next chunks while this thread sends one: reading,
  // checksumming and sending in turn would hold the upload to a third of the wire's speed.
  transfer::ChunkReader::Options read_options;
  read_options.chunk_bytes = kUploadChunkBytes;
  absl::StatusOr<std::unique_ptr<transfer::ChunkReader>> reader =
      transfer::ChunkReader::Open(data_paths, 0, read_options);
  if (!reader.ok()) {
    context.TryCancel();
    writer->Finish();
    return reader.status();
  }
  uint64_t sent = 0;
  uint32_t crc = 0;
  absl::Status read_error;
  for (;;) {
    absl::StatusOr<std::optional<transfer::ChunkReader::Chunk>> chunk = (*reader)->Next();
    if (!chunk.ok()) {
      read_error = chunk.status();
      break;
    }
    if (!chunk->has_value()) break;
    const size_t size = (*chunk)->bytes.size();
    crc = sent == 0 ? (*chunk)->crc32 : transfer::Crc32Combine(crc, (*chunk)->crc32, size);
    sent += size;
    request.Clear();
    *request.mutable_data() = std::move((*chunk)->bytes);
    if (!writer->Write(request)) return finish_with_server_status();
    if (on_progress) on_progress(sent, total);
  }
  if (!read_error.ok() || sent != total) {
    context.TryCancel();
    writer->Finish();
    if (read_error.code() != absl::StatusCode::kDataLoss && !read_error.ok()) return read_error;
    return absl::DataLossError(absl::StrCat("the data changed during the upload: ",
                                            DisplayPaths(data_paths), " held ", total,
                                            " bytes, then ", sent > total ? "more" : "fewer",
                                            read_error.ok() ? "" : ": ", read_error.message()));
  }
  request.Clear();
  request.mutable_upload_end()->set_total_bytes(total);
  request.mutable_upload_end()->set_crc32(crc);
  if (!writer->Write(request)) return finish_with_server_status();
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return response.job();
}

absl::StatusOr<v1::Job> TomoClient::GetJob(const std::string& job_id) {
  grpc::ClientContext context;
  SetUnaryDeadline(context);
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  grpc::Status status = stub_->GetJob(&context, request, &job);
  if (!status.ok()) return FromGrpcStatus(status);
  return job;
}

absl::StatusOr<std::vector<v1::Job>> TomoClient::ListJobs(
    const std::vector<v1::JobState>& states) {
  std::vector<v1::Job> jobs;
  std::string page_token;
  // A server that keeps returning the same token would loop forever; stop it.
  for (int page = 0; page < 1000000; ++page) {
    grpc::ClientContext context;
    SetUnaryDeadline(context);
    v1::ListJobsRequest request;
    for (v1::JobState state : states) request.add_states(state);
    request.set_page_size(1000);
    request.set_page_token(page_token);
    v1::ListJobsResponse response;
    grpc::Status status = stub_->ListJobs(&context, request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    for (v1::Job& job : *response.mutable_jobs()) jobs.push_back(std::move(job));
    if (response.next_page_token().empty()) return jobs;
    if (response.next_page_token() == page_token) {
      return absl::InternalError("ListJobs: tomod returned the same page token twice");
    }
    page_token = response.next_page_token();
  }
  return absl::InternalError("ListJobs: too many pages");
}

absl::Status TomoClient::Watch(const std::string& job_id, const JobEventFn& on_event) {
  grpc::ClientContext context;
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader =
      stub_->WatchJob(&context, request);
  v1::JobEvent event;
  while (reader->Read(&event)) {
    if (on_event) on_event(event);
  }
  return FromGrpcStatus(reader->Finish());
}

absl::StatusOr<v1::Job> TomoClient::Cancel(const std::string& job_id) {
  grpc::ClientContext context;
  SetUnaryDeadline(context);
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  grpc::Status status = stub_->CancelJob(&context, request, &job);
  if (!status.ok()) return FromGrpcStatus(status);
  return job;
}

absl::Status TomoClient::Delete(const std::string& job_id) {
  grpc::ClientContext context;
  SetUnaryDeadline(context);
  v1::DeleteJobRequest request;
  request.set_job_id(job_id);
  v1::DeleteJobResponse response;
  return FromGrpcStatus(stub_->DeleteJob(&context, request, &response));
}

absl::StatusOr<v1::ServerInfo> TomoClient::GetServerInfo() {
  grpc::ClientContext context;
  SetUnaryDeadline(context);
  v1::ServerInfo info;
  grpc::Status status = stub_->GetServerInfo(&context, v1::GetServerInfoRequest(), &info);
  if (!status.ok()) return FromGrpcStatus(status);
  return info;
}

absl::StatusOr<v1::ResultFile> TomoClient::Fetch(const std::string& job_id,
                                                 const std::string& result_name,
                                                 const std::string& output_path, bool resume,
                                                 const ByteProgressFn& on_progress) {
  bool offset_refused = false;
  absl::StatusOr<v1::ResultFile> result =
      FetchOnce(job_id, result_name, output_path, resume, on_progress, &offset_refused);
  if (!result.ok() && offset_refused) {
    // The partial file is longer than the result (left from another file): start over.
    return FetchOnce(job_id, result_name, output_path, /*resume=*/false, on_progress,
                     &offset_refused);
  }
  return result;
}

absl::StatusOr<WatchedFetch> TomoClient::WatchAndFetch(const std::string& job_id,
                                                       const std::string& result_name,
                                                       const std::string& output_path,
                                                       const JobEventFn& on_event, bool resume,
                                                       const ByteProgressFn& on_progress) {
  std::thread fetcher;
  absl::StatusOr<v1::ResultFile> fetched = absl::UnknownError("the fetch did not run");
  bool started = false, started_early = false;
  auto start_fetch = [&](bool early) {
    if (started) return;
    started = true;
    started_early = early;
    fetcher = std::thread([&] {
      fetched = Fetch(job_id, result_name, output_path, resume, on_progress);
    });
  };
  // Watch's callback runs on this thread: started and started_early are this thread's.
  absl::Status watched = Watch(job_id, [&](const v1::JobEvent& event) {
    if (on_event) on_event(event);
    if (event.state() == v1::JOB_STATE_RUNNING && event.progress().stage() == kWriteResultsStage) {
      start_fetch(/*early=*/true);
    } else if (event.state() == v1::JOB_STATE_SUCCEEDED) {
      start_fetch(/*early=*/false);
    }
  });
  if (fetcher.joinable()) fetcher.join();
  if (!watched.ok()) return watched;
  absl::StatusOr<v1::Job> job = GetJob(job_id);
  if (!job.ok()) return job.status();
  WatchedFetch result;
  result.job = std::move(*job);
  result.started_early = started_early;
  if (result.job.state() != v1::JOB_STATE_SUCCEEDED) {
    // An early fetch ended ABORTED (its partial file removed) or was refused: whatever
    // partial file it left is of a job that did not succeed.
    if (started) ::unlink((output_path + ".partial").c_str());
    if (!IsFinal(result.job.state())) {
      return absl::FailedPreconditionError(
          absl::StrCat("the watch of job ", job_id, " ended while it is ",
                       JobStateName(result.job.state())));
    }
    return result;
  }
  if (!started || absl::IsAborted(fetched.status()) ||
      absl::IsFailedPrecondition(fetched.status())) {
    // No fetch yet; an early one refused (a result that tomod does not stream while
    // writing it, or a tomod without early fetch); or one of an earlier run (handed back
    // by a stop of tomod) while this run succeeded: fetch the file.
    fetched = Fetch(job_id, result_name, output_path, resume, on_progress);
  }
  if (!fetched.ok()) return fetched.status();
  result.file = std::move(*fetched);
  return result;
}

absl::StatusOr<v1::ResultFile> TomoClient::FetchOnce(const std::string& job_id,
                                                     const std::string& result_name,
                                                     const std::string& output_path,
                                                     bool resume,
                                                     const ByteProgressFn& on_progress,
                                                     bool* offset_refused) {
  *offset_refused = false;
  const std::string partial_path = output_path + ".partial";
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (resume ? 0 : O_TRUNC);
  Fd fd(::open(partial_path.c_str(), flags, 0644));
  if (fd.get() < 0) return ErrnoStatus(errno, "cannot create", partial_path);
  off_t end = ::lseek(fd.get(), 0, SEEK_END);
  if (end < 0) return ErrnoStatus(errno, "cannot seek in", partial_path);
  uint64_t offset = static_cast<uint64_t>(end);

  // A resumed download is checked against the CRC-32 of the whole file: the part already
  // here is checksummed once, the rest as it arrives.
  uint32_t prefix_crc = 0;
  if (offset > 0) {
    absl::StatusOr<uint32_t> crc = FileCrc32(partial_path);
    if (!crc.ok()) return crc.status();
    prefix_crc = *crc;
  }
  // This thread only receives; a writer thread writes and checksum threads checksum, so
  // that the download runs at the wire's speed rather than the sum of the three.
  std::unique_ptr<transfer::ChunkWriter> writer =
      transfer::ChunkWriter::Create(fd.Release(), partial_path, {});

  grpc::ClientContext context;
  v1::FetchResultRequest request;
  request.set_job_id(job_id);
  request.set_name(result_name);
  request.set_offset(offset);
  std::unique_ptr<grpc::ClientReader<v1::FetchResultResponse>> reader =
      stub_->FetchResult(&context, request);

  v1::FetchResultResponse response;
  bool got_last = false;
  uint64_t total = 0;
  uint32_t expected_crc = 0;
  absl::Status local_error;
  while (reader->Read(&response)) {
    if (got_last) {
      local_error = absl::DataLossError(
          absl::StrCat("fetch ", job_id, "/", result_name, ": data after the last message"));
      break;
    }
    if (!response.data().empty()) {
      if (response.offset() != offset) {
        local_error = absl::DataLossError(absl::StrCat(
            "fetch ", job_id, "/", result_name, ": tomod sent bytes at offset ",
            response.offset(), ", expected ", offset));
        break;
      }
      offset += response.data().size();
      absl::StatusOr<bool> room = writer->Append(std::move(*response.mutable_data()));
      if (!room.ok()) {
        local_error = room.status();
        break;
      }
      if (!*room) writer->WaitForRoom();
    }
    if (response.last()) {
      got_last = true;
      total = response.total_bytes();
      expected_crc = response.crc32();
    }
    if (on_progress) on_progress(offset, got_last ? total : 0);
  }
  if (!local_error.ok()) {
    context.TryCancel();
    reader->Finish();
    return local_error;
  }
  grpc::Status status = reader->Finish();
  if (status.error_code() == grpc::StatusCode::ABORTED) {
    // tomod streamed a result being written and the job did not succeed: those bytes are
    // no result, not even the start of one to resume.
    writer->Finish(/*sync=*/false).IgnoreError();
    writer.reset();
    ::unlink(partial_path.c_str());
    return FromGrpcStatus(status);
  }
  if (!status.ok()) {
    // What arrived is kept (written and synced) for a resume.
    writer->Finish(/*sync=*/true).IgnoreError();
    // A resume offset beyond the file's end: the partial file is not this result's.
    if (request.offset() > 0 && (status.error_code() == grpc::StatusCode::OUT_OF_RANGE ||
                                 status.error_code() == grpc::StatusCode::INVALID_ARGUMENT)) {
      *offset_refused = true;
    }
    return FromGrpcStatus(status);
  }
  absl::StatusOr<transfer::ChunkWriter::Summary> written = writer->Finish(/*sync=*/true);
  if (!written.ok()) return written.status();
  writer.reset();  // closes the file
  if (!got_last) {
    return absl::DataLossError(absl::StrCat("fetch ", job_id, "/", result_name,
                                            ": the stream ended without its final checksum; "
                                            "fetch again to resume"));
  }
  if (offset != total) {
    if (offset > total) ::unlink(partial_path.c_str());
    return absl::DataLossError(absl::StrCat("fetch ", job_id, "/", result_name, ": received ",
                                            offset, " bytes, tomod says the file has ", total));
  }
  const uint32_t crc = request.offset() == 0 ? written->crc32
                                             : transfer::Crc32Combine(prefix_crc, written->crc32,
                                                                      written->bytes);
  if (crc != expected_crc) {
    ::unlink(partial_path.c_str());
    char got[16], want[16];
    std::snprintf(got, sizeof(got), "%08x", crc);
    std::snprintf(want, sizeof(want), "%08x", expected_crc);
    return absl::DataLossError(absl::StrCat(
        "fetch ", job_id, "/", result_name, ": CRC-32 of ", partial_path, " is ", got,
        ", tomod says ", want, "; the partial file was removed, fetch again"));
  }
  if (::rename(partial_path.c_str(), output_path.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot rename ", partial_path, " to"), output_path);
  }
  v1::ResultFile file;
  file.set_name(result_name);
  file.set_size_bytes(total);
  file.set_crc32(expected_crc);
  return file;
}

}  // namespace tomo::client

#include "client/tomo_client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "client/channel_security.h"
#include "client/fetch_response_reader.h"
#include "core/io/mapped_range.h"
#include "transfer/chunk_reader.h"
#include "transfer/chunk_writer.h"
#include "transfer/crc32.h"
#include "transfer/mapped_file_writer.h"
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

namespace {

// MakeChannel's, with channel_id > 0 set as "grpc.channel_id": channels whose arguments
// differ share no connection.
std::shared_ptr<grpc::Channel> MakeChannelNumbered(const std::string& target,
                                                   const ClientOptions& options,
                                                   int channel_id) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  if (channel_id > 0) args.SetInt("grpc.channel_id", channel_id);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      options.credentials ? options.credentials : grpc::InsecureChannelCredentials();
  if (!options.bearer_token.empty()) {
    return grpc::experimental::CreateCustomChannelWithInterceptors(
        target, credentials, args, BearerTokenInterceptors(options.bearer_token));
  }
  return grpc::CreateCustomChannel(target, credentials, args);
}

std::string Hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "%08x", value);
  return text;
}

// A download whose CRC-32 is not the recorded one (the caller removes its partial file).
absl::Status CrcMismatchError(const std::string& what, const std::string& partial_path,
                              uint32_t got, uint32_t want) {
  return absl::DataLossError(absl::StrCat(what, ": CRC-32 of ", partial_path, " is ", Hex(got),
                                          ", tomod says ", Hex(want),
                                          "; the partial file was removed, fetch again"));
}

// The checked download under its final name, described as tomod records it.
absl::StatusOr<v1::ResultFile> PublishFetched(const std::string& partial_path,
                                              const std::string& output_path,
                                              const std::string& name, uint64_t size,
                                              uint32_t crc) {
  if (::rename(partial_path.c_str(), output_path.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot rename ", partial_path, " to"), output_path);
  }
  v1::ResultFile file;
  file.set_name(name);
  file.set_size_bytes(size);
  file.set_crc32(crc);
  return file;
}

// A MappedFileWriter of [offset, file_bytes) of the partial file open as fd (not taken:
// the writer gets a duplicate) when it pays off: file_bytes known (an older tomod sends 0),
// at least min_bytes, and the file on tmpfs. Null when it does not.
absl::StatusOr<std::unique_ptr<transfer::MappedFileWriter>> MappedWriterIfItPays(
    int fd, const std::string& partial_path, uint64_t offset, uint64_t file_bytes,
    uint64_t min_bytes) {
  if (file_bytes == 0 || file_bytes < min_bytes || offset > file_bytes ||
      !transfer::MappedFileWriter::Suits(fd)) {
    return nullptr;
  }
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return ErrnoStatus(errno, "cannot duplicate the descriptor of", partial_path);
  return transfer::MappedFileWriter::Create(copy, partial_path, offset, file_bytes, {});
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const ClientOptions& options) {
  return MakeChannelNumbered(target, options, /*channel_id=*/0);
}

TomoClient::TomoClient(std::string target, ClientOptions options)
    : target_(std::move(target)), options_(std::move(options)), own_channel_(true) {
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
  if (options_.upload_streams < 0 || options_.upload_streams > kMaxUploadStreams) {
    return absl::InvalidArgumentError(absl::StrCat("upload_streams: ", options_.upload_streams,
                                                   " is outside [0, ", kMaxUploadStreams, "]"));
  }
  // Sizes first, so that a spec that does not match the files sends nothing.
  uint64_t total = 0;
  std::vector<uint64_t> file_bytes;
  for (const std::string& path : data_paths) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "cannot open", path);
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
    }
    file_bytes.push_back(static_cast<uint64_t>(st.st_size));
    total += file_bytes.back();
  }
  v1::JobSpec sent_spec = spec;
  if (sent_spec.input().size_bytes() == 0) {
    sent_spec.mutable_input()->set_size_bytes(total);
  } else if (sent_spec.input().size_bytes() != total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input.size_bytes: ", sent_spec.input().size_bytes(), " does not match the data: ",
        DisplayPaths(data_paths), " holds ", total, " bytes"));
  }

  if (const uint32_t streams = UploadStreams(total); streams > 1) {
    return SubmitStriped(sent_spec, data_paths, file_bytes, streams, on_progress);
  }

  grpc::ClientContext context;
  v1::SubmitResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::SubmitRequest>> writer =
      stub_->Submit(&context, &response);
  auto finish_with_server_status = [&]() { return FinishEndedSubmit(*writer, response); };

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

uint32_t TomoClient::UploadStreams(uint64_t total_bytes) {
  const int wanted =
      options_.upload_streams == 0 ? kAutomaticTransferStreams : options_.upload_streams;
  if (wanted <= 1 || total_bytes < options_.striped_upload_min_bytes) return 1;
  uint32_t streams = static_cast<uint32_t>(wanted);
  {
    std::lock_guard<std::mutex> lock(download_mu_);
    if (!server_upload_streams_.has_value()) {
      // A tomod from before striped uploads reports 0 and would wait forever for stripe 0's
      // spec to be answered: ask first. Unreachable: one stream, whose Submit says so.
      absl::StatusOr<v1::ServerInfo> info = GetServerInfo();
      if (!info.ok()) return 1;
      server_upload_streams_ = info->max_upload_streams();
    }
    streams = std::min(streams, *server_upload_streams_);
  }
  const uint64_t units = (total_bytes + kUploadChunkBytes - 1) / kUploadChunkBytes;
  return static_cast<uint32_t>(std::min<uint64_t>(std::max<uint32_t>(streams, 1), units));
}

absl::StatusOr<v1::Job> FinishEndedSubmit(grpc::ClientWriter<v1::SubmitRequest>& writer,
                                          const v1::SubmitResponse& response) {
  grpc::Status status = writer.Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  // tomod answers right after the spec, without the data, when spec.idempotency_key names
  // a job it has: that job is the reply.
  if (!response.job().id().empty()) return response.job();
  return absl::UnavailableError("tomod closed the upload early without an error");
}

absl::StatusOr<v1::ServerInfo> TomoClient::GetServerInfo() {
  grpc::ClientContext context;
  SetUnaryDeadline(context);
  v1::ServerInfo info;
  grpc::Status status = stub_->GetServerInfo(&context, v1::GetServerInfoRequest(), &info);
  if (!status.ok()) return FromGrpcStatus(status);
  return info;
}

int TomoClient::DownloadStreams(const std::string& output_path) const {
  if (options_.download_streams != 0) return options_.download_streams;
  const std::filesystem::path parent = std::filesystem::path(output_path).parent_path();
  return core::IsOnTmpfs(parent.empty() ? "." : parent.c_str())
             ? kAutomaticTransferStreams
             : 1;
}

absl::StatusOr<v1::ResultFile> TomoClient::Fetch(const std::string& job_id,
                                                 const std::string& result_name,
                                                 const std::string& output_path, bool resume,
                                                 const ByteProgressFn& on_progress) {
  if (options_.download_streams < 0 || options_.download_streams > kMaxDownloadStreams) {
    return absl::InvalidArgumentError(absl::StrCat("download_streams: ",
                                                   options_.download_streams, " is outside [0, ",
                                                   kMaxDownloadStreams, "]"));
  }
  const int streams = DownloadStreams(output_path);
  auto fetch_once = [&](bool resume_now, bool* offset_refused) {
    return streams > 1
               ? FetchStriped(job_id, result_name, output_path, streams, resume_now, on_progress,
                              offset_refused)
               : FetchOnce(job_id, result_name, output_path, resume_now, on_progress,
                           offset_refused);
  };
  bool offset_refused = false;
  absl::StatusOr<v1::ResultFile> result = fetch_once(resume, &offset_refused);
  if (!result.ok() && offset_refused) {
    // The partial file is longer than the result (left from another file): start over.
    return fetch_once(/*resume_now=*/false, &offset_refused);
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
  // O_RDWR: a shared mapping (MappedFileWriter) needs the file open for reading too.
  int flags = O_RDWR | O_CREAT | O_CLOEXEC | (resume ? 0 : O_TRUNC);
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
  // that the download runs at the wire's speed rather than the sum of the three. The
  // writer is chosen on the first message, which tells the file's size: a large file on
  // tmpfs is copied through a mapping by several threads (mapped), anything else is
  // written by one thread (writer).
  std::unique_ptr<transfer::ChunkWriter> writer;
  std::unique_ptr<transfer::MappedFileWriter> mapped;

  grpc::ClientContext context;
  v1::FetchResultRequest request;
  request.set_job_id(job_id);
  request.set_name(result_name);
  request.set_offset(offset);
  FetchResponseReader reader(*channel_, &context, request);

  FetchedResponse fetched;
  const v1::FetchResultResponse& response = fetched.fields;
  bool got_last = false;
  uint64_t total = 0;
  uint32_t expected_crc = 0;
  absl::Status local_error;
  while (reader.Read(&fetched)) {
    if (got_last) {
      local_error = absl::DataLossError(
          absl::StrCat("fetch ", job_id, "/", result_name, ": data after the last message"));
      break;
    }
    if (!writer && !mapped) {
      absl::StatusOr<std::unique_ptr<transfer::MappedFileWriter>> made = MappedWriterIfItPays(
          fd.get(), partial_path, offset, response.file_bytes(),
          options_.mapped_download_min_bytes);
      if (!made.ok()) {
        local_error = made.status();
        break;
      }
      mapped = std::move(*made);
      if (mapped) {
        ++mapped_fetches_;
      } else {
        writer = transfer::ChunkWriter::Create(fd.Release(), partial_path, {});
      }
    }
    if (fetched.data_bytes > 0) {
      if (response.offset() != offset) {
        local_error = absl::DataLossError(absl::StrCat(
            "fetch ", job_id, "/", result_name, ": tomod sent bytes at offset ",
            response.offset(), ", expected ", offset));
        break;
      }
      const uint64_t at = offset;
      offset += fetched.data_bytes;
      // Mapped: copied once, from gRPC's slices into the file.
      absl::StatusOr<bool> room =
          mapped ? mapped->Append(at, std::move(fetched.data), std::move(fetched.keep))
                 : writer->Append(fetched.JoinedData());
      if (!room.ok()) {
        local_error = room.status();
        break;
      }
      if (!*room && mapped) mapped->WaitForRoom();
      if (!*room && writer) writer->WaitForRoom();
    }
    if (response.last()) {
      got_last = true;
      total = response.total_bytes();
      expected_crc = response.crc32();
    }
    if (on_progress) on_progress(offset, got_last ? total : 0);
  }
  // A mapped file has its final size from the start: after a failure it is cut to the
  // bytes copied in one run from the fetch's offset, so that a resume starts there.
  auto keep_what_arrived = [&]() {
    if (mapped) mapped->CutToWrittenPrefix().IgnoreError();
    if (writer) writer->Finish(/*sync=*/true).IgnoreError();
  };
  if (!local_error.ok()) {
    context.TryCancel();
    reader.Finish();
    keep_what_arrived();
    return local_error;
  }
  grpc::Status status = reader.Finish();
  if (status.error_code() == grpc::StatusCode::ABORTED) {
    // tomod streamed a result being written and the job did not succeed: those bytes are
    // no result, not even the start of one to resume.
    if (writer) writer->Finish(/*sync=*/false).IgnoreError();
    writer.reset();
    mapped.reset();
    ::unlink(partial_path.c_str());
    return FromGrpcStatus(status);
  }
  if (!status.ok()) {
    // What arrived is kept (written and synced) for a resume.
    keep_what_arrived();
    // A resume offset beyond the file's end: the partial file is not this result's.
    if (request.offset() > 0 && (status.error_code() == grpc::StatusCode::OUT_OF_RANGE ||
                                 status.error_code() == grpc::StatusCode::INVALID_ARGUMENT)) {
      *offset_refused = true;
    }
    return FromGrpcStatus(status);
  }
  transfer::ChunkWriter::Summary written;  // of the bytes from request.offset()
  if (mapped) {
    if (!got_last || offset != total || total != mapped->size()) {
      keep_what_arrived();  // the checks below say what is wrong
    } else {
      absl::StatusOr<transfer::MappedFileWriter::Summary> copied = mapped->Finish();
      if (!copied.ok()) {
        keep_what_arrived();
        return copied.status();
      }
      written.bytes = copied->bytes;
      written.crc32 = copied->crc32;
    }
    if (got_last && total != mapped->size() && offset == total) {
      return absl::DataLossError(absl::StrCat("fetch ", job_id, "/", result_name,
                                              ": tomod said the file has ", mapped->size(),
                                              " bytes at the start, ", total, " at the end"));
    }
    mapped.reset();  // closes its descriptor
  } else if (writer) {
    absl::StatusOr<transfer::ChunkWriter::Summary> summary = writer->Finish(/*sync=*/true);
    if (!summary.ok()) return summary.status();
    written = *summary;
    writer.reset();  // closes the file
  }
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
  const uint32_t crc = request.offset() == 0 ? written.crc32
                                             : transfer::Crc32Combine(prefix_crc, written.crc32,
                                                                      written.bytes);
  if (crc != expected_crc) {
    ::unlink(partial_path.c_str());
    return CrcMismatchError(absl::StrCat("fetch ", job_id, "/", result_name), partial_path, crc,
                            expected_crc);
  }
  return PublishFetched(partial_path, output_path, result_name, total, expected_crc);
}

std::vector<v1::Reconstruction::Stub*> TomoClient::DownloadStubs(int n) {
  std::lock_guard<std::mutex> lock(download_mu_);
  std::vector<v1::Reconstruction::Stub*> stubs = {stub_.get()};
  for (int k = 1; k < n; ++k) {
    if (!own_channel_) {
      stubs.push_back(stub_.get());  // a channel given by the caller: only that one
      continue;
    }
    if (download_stubs_.size() < static_cast<size_t>(k)) {
      download_channels_.push_back(MakeChannelNumbered(target_, options_, k));
      download_stubs_.push_back(v1::Reconstruction::NewStub(download_channels_.back()));
    }
    stubs.push_back(download_stubs_[k - 1].get());
  }
  return stubs;
}

std::vector<grpc::Channel*> TomoClient::DownloadChannels(int n) {
  DownloadStubs(n);  // makes the channels that are missing
  std::lock_guard<std::mutex> lock(download_mu_);
  std::vector<grpc::Channel*> channels = {channel_.get()};
  for (int k = 1; k < n; ++k) {
    channels.push_back(own_channel_ ? download_channels_[k - 1].get() : channel_.get());
  }
  return channels;
}

namespace {

// What one stream of a striped fetch received.
struct StripeReceipt {
  struct Unit {
    uint64_t bytes = 0;  // received from the unit's start
    uint32_t crc32 = 0;  // of those bytes
  };
  std::map<uint64_t, Unit> units;  // by unit number from the fetch's offset
  bool got_last = false;
  uint64_t total = 0;
  uint32_t crc32 = 0;
};

// pwrite of all of bytes at offset; INTERNAL or RESOURCE_EXHAUSTED naming the path.
absl::Status WriteAt(int fd, const std::string& bytes, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done,
                         static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      std::string message = absl::StrCat("cannot write ", path, " at byte ", offset + done,
                                         ": ", std::strerror(error));
      if (error == ENOSPC || error == EDQUOT || error == EFBIG) {
        return absl::ResourceExhaustedError(message);
      }
      return absl::InternalError(message);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::ResultFile> TomoClient::FetchStriped(const std::string& job_id,
                                                        const std::string& result_name,
                                                        const std::string& output_path,
                                                        int stream_count, bool resume,
                                                        const ByteProgressFn& on_progress,
                                                        bool* offset_refused) {
  *offset_refused = false;
  const uint32_t streams = static_cast<uint32_t>(stream_count);
  const uint64_t unit = kDownloadStripeBytes;
  const std::string what = absl::StrCat("fetch ", job_id, "/", result_name);
  const std::string partial_path = output_path + ".partial";
  Fd fd(::open(partial_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | (resume ? 0 : O_TRUNC),
               0644));
  if (fd.get() < 0) return ErrnoStatus(errno, "cannot create", partial_path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "cannot stat", partial_path);
  const uint64_t offset = static_cast<uint64_t>(st.st_size);
  uint32_t prefix_crc = 0;  // of the bytes already here, checked with the rest at the end
  if (offset > 0) {
    absl::StatusOr<uint32_t> crc = FileCrc32(partial_path);
    if (!crc.ok()) return crc.status();
    prefix_crc = *crc;
  }

  const std::vector<grpc::Channel*> channels = DownloadChannels(static_cast<int>(streams));
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  for (uint32_t k = 0; k < streams; ++k) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
  }
  std::vector<StripeReceipt> receipts(streams);
  std::mutex mu;  // guards first_error, received, known_total, on_progress and the writer
  absl::Status first_error;  // the first stream's failure; the others are then cancelled
  uint64_t received = 0, known_total = 0;
  // Chosen on the first message of any stream, which tells the file's size: a large file
  // on tmpfs is copied through a mapping by several threads (each stream's thread appends
  // its units), anything else pwritten by the streams' threads.
  bool writer_chosen = false;
  std::unique_ptr<transfer::MappedFileWriter> mapped;
  auto choose_writer = [&](uint64_t file_bytes) -> absl::StatusOr<transfer::MappedFileWriter*> {
    std::lock_guard<std::mutex> lock(mu);
    if (!writer_chosen) {
      writer_chosen = true;
      absl::StatusOr<std::unique_ptr<transfer::MappedFileWriter>> made = MappedWriterIfItPays(
          fd.get(), partial_path, offset, file_bytes, options_.mapped_download_min_bytes);
      if (!made.ok()) return made.status();
      mapped = std::move(*made);
      if (mapped) ++mapped_fetches_;
    }
    return mapped.get();
  };
  auto fail = [&](absl::Status status) {
    std::lock_guard<std::mutex> lock(mu);
    if (!first_error.ok()) return;
    first_error = std::move(status);
    for (auto& context : contexts) context->TryCancel();
  };

  // Stream k receives stripe k: its units in order, each message at the next bytes the
  // stripe may hold (within one unit), written where it belongs.
  auto receive = [&](uint32_t k) {
    StripeReceipt& receipt = receipts[k];
    v1::FetchResultRequest request;
    request.set_job_id(job_id);
    request.set_name(result_name);
    request.set_offset(offset);
    request.set_stripe_count(streams);
    request.set_stripe_index(k);
    request.set_stripe_bytes(unit);
    FetchResponseReader reader(*channels[k], contexts[k].get(), request);
    transfer::StripeLayout stripe;  // the file's end is not known yet
    stripe.offset = offset;
    stripe.size = std::numeric_limits<uint64_t>::max() / 2;
    stripe.count = streams;
    stripe.index = k;
    stripe.unit_bytes = unit;
    uint64_t next = offset;  // where this stripe's next bytes may start
    FetchedResponse fetched;
    const v1::FetchResultResponse& response = fetched.fields;
    absl::Status local_error;
    transfer::MappedFileWriter* writer = nullptr;  // null: pwrite
    bool first_message = true;
    while (reader.Read(&fetched)) {
      if (receipt.got_last) {
        local_error = absl::DataLossError(
            absl::StrCat(what, ": stream ", k, " sent data after its last message"));
        break;
      }
      if (first_message) {
        first_message = false;
        absl::StatusOr<transfer::MappedFileWriter*> chosen = choose_writer(response.file_bytes());
        if (!chosen.ok()) {
          local_error = chosen.status();
          break;
        }
        writer = *chosen;
      }
      const uint64_t data_bytes = fetched.data_bytes;
      if (data_bytes > 0) {
        const auto [begin, end] = stripe.NextRange(next, unit);
        if (response.offset() != begin || data_bytes > end - begin) {
          local_error = absl::DataLossError(absl::StrCat(
              what, ": tomod sent ", data_bytes, " bytes at offset ", response.offset(),
              " in stream ", k, " of ", streams, ", expected at most ", end - begin,
              " at offset ", begin));
          break;
        }
        const uint32_t data_crc = fetched.DataCrc32();
        if (writer != nullptr) {
          // Copied once, from gRPC's slices into the file.
          absl::StatusOr<bool> room =
              writer->Append(begin, std::move(fetched.data), std::move(fetched.keep));
          if (!room.ok()) {
            local_error = room.status();
            break;
          }
          if (!*room) writer->WaitForRoom();
        } else {
          local_error = WriteAt(fd.get(), fetched.JoinedData(), begin, partial_path);
          if (!local_error.ok()) break;
        }
        StripeReceipt::Unit& got = receipt.units[(begin - offset) / unit];
        got.crc32 = transfer::Crc32Combine(got.crc32, data_crc, data_bytes);
        got.bytes += data_bytes;
        next = begin + data_bytes;
      }
      if (response.last()) {
        receipt.got_last = true;
        receipt.total = response.total_bytes();
        receipt.crc32 = response.crc32();
      }
      std::lock_guard<std::mutex> lock(mu);
      received += data_bytes;
      if (response.last()) known_total = response.total_bytes();
      if (on_progress) on_progress(offset + received, known_total);
    }
    if (!local_error.ok()) {
      fail(local_error);
      contexts[k]->TryCancel();
      reader.Finish();
      return;
    }
    grpc::Status status = reader.Finish();
    if (!status.ok()) {
      fail(FromGrpcStatus(status));
    } else if (!receipt.got_last) {
      fail(absl::DataLossError(absl::StrCat(what, ": stream ", k,
                                            " ended without its final checksum; fetch again "
                                            "to resume")));
    }
  };
  std::vector<std::thread> threads;
  for (uint32_t k = 0; k < streams; ++k) threads.emplace_back(receive, k);
  for (std::thread& thread : threads) thread.join();
  // The mapped copies done: the file holds every byte appended, or, after a failed copy,
  // the run copied from offset (a gap is judged below, from the receipts, as for pwrite).
  uint64_t mapped_prefix = std::numeric_limits<uint64_t>::max();
  if (mapped) {
    absl::StatusOr<transfer::MappedFileWriter::Summary> copied = mapped->Finish();
    if (!copied.ok() && !absl::IsDataLoss(copied.status()) && first_error.ok()) {
      first_error = copied.status();
    }
    mapped_prefix = mapped->written_prefix();
    mapped.reset();  // unmapped; its descriptor (a duplicate of fd) closed
  }

  // The units in file order; the longest prefix of the file that arrived, and its CRC-32.
  std::map<uint64_t, StripeReceipt::Unit> units;
  for (const StripeReceipt& receipt : receipts) {
    units.insert(receipt.units.begin(), receipt.units.end());
  }
  uint64_t prefix = offset;
  uint32_t crc = prefix_crc;
  for (uint64_t u = 0;; ++u) {
    auto it = units.find(u);
    if (it == units.end()) break;
    prefix += it->second.bytes;
    crc = transfer::Crc32Combine(crc, it->second.crc32, it->second.bytes);
    if (it->second.bytes < unit) break;  // the file's last unit, or a unit cut short
  }
  prefix = std::min(prefix, mapped_prefix);  // crc is then not prefix's: no longer used
  // Keeps [0, prefix) for a resume, synced; the descriptor is closed.
  auto keep_prefix = [&]() {
    if (::ftruncate(fd.get(), static_cast<off_t>(prefix)) != 0 || ::fsync(fd.get()) != 0) {
      const absl::Status status = ErrnoStatus(errno, "cannot truncate", partial_path);
      fd.Reset();
      ::unlink(partial_path.c_str());
      return status;
    }
    fd.Reset();
    return absl::OkStatus();
  };
  auto remove_partial = [&]() {
    fd.Reset();
    ::unlink(partial_path.c_str());
  };

  if (!first_error.ok()) {
    if (absl::IsAborted(first_error)) {
      // tomod streamed a result being written and the job did not succeed: those bytes are
      // no result, not even the start of one to resume.
      remove_partial();
      return first_error;
    }
    keep_prefix().IgnoreError();  // the fetch's error is the one to report
    if (offset > 0 && absl::IsOutOfRange(first_error)) *offset_refused = true;
    return first_error;
  }
  const uint64_t total = receipts[0].total;
  const uint32_t expected_crc = receipts[0].crc32;
  for (uint32_t k = 1; k < streams; ++k) {
    if (receipts[k].total != total || receipts[k].crc32 != expected_crc) {
      remove_partial();
      return absl::DataLossError(absl::StrCat(
          what, ": the streams disagree on the file: stream 0 says ", total, " bytes, CRC-32 ",
          Hex(expected_crc), ", stream ", k, " says ", receipts[k].total, " bytes, CRC-32 ",
          Hex(receipts[k].crc32), "; the partial file was removed, fetch again"));
    }
  }
  if (offset > total) {
    remove_partial();
    return absl::DataLossError(absl::StrCat(what, ": the partial file holds ", offset,
                                            " bytes, tomod says the file has ", total));
  }
  // Every byte of [offset, total) exactly once: each unit whole, none beyond the end (within
  // a stream the bytes came in order, each unit from one stream).
  const uint64_t unit_count = (total - offset + unit - 1) / unit;
  for (const auto& [u, got] : units) {
    const uint64_t length = std::min(unit, total - std::min(total, offset + u * unit));
    if (u >= unit_count || got.bytes > length) {
      remove_partial();
      return absl::DataLossError(absl::StrCat(what, ": tomod sent bytes beyond the end of the ",
                                              total, "-byte file; the partial file was removed"));
    }
  }
  if (prefix != total) {
    absl::Status kept = keep_prefix();
    if (!kept.ok()) return kept;
    return absl::DataLossError(absl::StrCat(what, ": received ", prefix - offset, " of ",
                                            total - offset, " bytes from offset ", offset,
                                            "; fetch again to resume"));
  }
  if (crc != expected_crc) {
    remove_partial();
    return CrcMismatchError(what, partial_path, crc, expected_crc);
  }
  if (::fsync(fd.get()) != 0) return ErrnoStatus(errno, "cannot sync", partial_path);
  if (fd.Close() != 0) return ErrnoStatus(errno, "cannot close", partial_path);
  return PublishFetched(partial_path, output_path, result_name, total, expected_crc);
}

}  // namespace tomo::client

// Fuzzes a Submit stream's messages through tomod's admission and upload: the bytes are a
// sequence of length-delimited tomoserve.v1.SubmitRequest messages (a varint length, then
// the message), taken as the Submit reactor takes them (upload_reactors.h): the spec first
// through JobManager::BeginUpload (validation, limits, the spool reservation), data into
// the Upload, upload_end through its Commit; a message out of order or one that does not
// parse ends the stream (the reactor's INVALID_ARGUMENT), and nothing after upload_end is
// taken. A committed job is cancelled and deleted at the end. The manager (one, shared by every input) runs
// on a spool in a fresh temporary directory with scheduling paused, so nothing
// reconstructs (scripts/fuzz closes the target's stderr: tomod logs every state change).
// Promises checked: refusals carry the codes the API documents; every input
// leaves no job, no job directory and no reserved byte behind.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/algorithms/reconstruction.h"
#include "core/devices/devices.h"
#include "fuzz/fuzz_targets.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/stubs/logging.h"
#include "server/jobs/job_manager.h"
#include "server/storage/spool.h"

namespace tomo::fuzz {
namespace {

namespace pb = ::tomoserve::v1;

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "broken promise: %s\n", what);
  std::abort();
}

bool IsApiRefusal(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
      return true;
    default:
      return false;
  }
}

struct Harness {
  Harness() {
    google::protobuf::SetLogHandler(nullptr);
    const std::filesystem::path base = std::filesystem::exists("/dev/shm")
                                           ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path();
    root = (base / ("tomo-fuzz-submit-" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(root);
    absl::StatusOr<std::unique_ptr<server::Spool>> opened = server::Spool::Open(root);
    Require(opened.ok(), "the fuzzing spool opens");
    spool = std::move(*opened);
    registry = core::AlgorithmRegistry::WithBuiltins();
    server::JobManagerOptions options;
    options.devices = {core::CpuDevice()};
    options.limits.max_upload_bytes = 1 << 20;
    options.limits.max_voxels = 1 << 16;
    options.limits.max_views = 256;
    options.limits.max_queue_length = 8;
    options.max_spool_bytes = 8 << 20;
    options.min_free_spool_bytes = 1 << 20;
    options.prefetch_bytes = 0;
    options.reconstruct_while_uploading = server::WhileUploading::kNever;
    manager = std::make_unique<server::JobManager>(options, *spool, registry);
    manager->SetSchedulingPaused(true);
    Require(manager->Start().ok(), "the fuzzing manager starts");
    // The spool goes when the process exits (libFuzzer's -max_total_time ends with exit).
    static std::string* spool_root = new std::string(root);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(*spool_root, ignored);
    });
  }
  std::string root;
  std::unique_ptr<server::Spool> spool;
  core::AlgorithmRegistry registry;
  std::unique_ptr<server::JobManager> manager;
};

std::vector<pb::SubmitRequest> Messages(const uint8_t* data, size_t size, bool* bad_message) {
  std::vector<pb::SubmitRequest> messages;
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  while (messages.size() < 32) {
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) break;
    std::string bytes;
    if (!in.ReadString(&bytes, static_cast<int>(std::min<uint32_t>(length, 1 << 20)))) break;
    pb::SubmitRequest message;
    if (!message.ParseFromString(bytes)) {
      *bad_message = true;  // the reactor ends the stream with INVALID_ARGUMENT here
      break;
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

}  // namespace

int FuzzSubmitStream(const uint8_t* data, size_t size) {
  static Harness* harness = new Harness();
  server::JobManager& manager = *harness->manager;
  bool bad_message = false;
  const std::vector<pb::SubmitRequest> messages = Messages(data, size, &bad_message);
  std::unique_ptr<server::Upload> upload;
  std::optional<pb::Job> committed;
  for (const pb::SubmitRequest& message : messages) {
    if (committed.has_value()) break;  // a message after upload_end: the job is refused
    bool stop = false;
    switch (message.part_case()) {
      case pb::SubmitRequest::kSpec: {
        if (upload != nullptr) {
          stop = true;  // spec sent twice
          break;
        }
        absl::StatusOr<std::unique_ptr<server::Upload>> begun =
            manager.BeginUpload(message.spec(), "fuzz");
        if (!begun.ok()) {
          Require(IsApiRefusal(begun.status()), "BeginUpload refuses with an API code");
          stop = true;
          break;
        }
        upload = std::move(*begun);
        if (upload->existing_job()) stop = true;
        break;
      }
      case pb::SubmitRequest::kData: {
        if (upload == nullptr) {
          stop = true;
          break;
        }
        absl::StatusOr<bool> appended = upload->Append(message.data());
        if (!appended.ok()) {
          Require(IsApiRefusal(appended.status()), "Append refuses with an API code");
          stop = true;
        }
        break;
      }
      case pb::SubmitRequest::kUploadEnd: {
        if (upload == nullptr) {
          stop = true;
          break;
        }
        absl::StatusOr<pb::Job> job =
            upload->Commit(message.upload_end().total_bytes(), message.upload_end().crc32());
        if (job.ok()) {
          Require(job->state() == pb::JOB_STATE_QUEUED, "a committed job is QUEUED");
          committed = *job;
        } else {
          Require(IsApiRefusal(job.status()), "Commit refuses with an API code");
          stop = true;
        }
        break;
      }
      case pb::SubmitRequest::PART_NOT_SET:
        stop = true;
        break;
    }
    if (stop) break;
  }
  (void)bad_message;
  upload.reset();  // an uncommitted upload removes its job
  if (committed.has_value()) {
    Require(manager.CancelJob(committed->id()).ok(), "a queued job can be cancelled");
    Require(manager.DeleteJob(committed->id()).ok(), "a cancelled job can be deleted");
  }
  Require(manager.spool_used_bytes() == 0, "every reservation is given back");
  Require(manager.ListJobs({}).ok() && manager.ListJobs({})->jobs_size() == 0,
          "no job is left");
  Require(harness->spool->ListJobDirs().empty(), "no job directory is left");
  return 0;
}

}  // namespace tomo::fuzz

#ifdef TOMO_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tomo::fuzz::FuzzSubmitStream(data, size);
}
#endif

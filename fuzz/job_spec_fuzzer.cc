// Fuzzes what tomod does with a Submit's first message before it takes any data: the bytes
// are a tomoserve.v1.JobSpec (the wire form a client sends), validated under tomod's
// default limits and under small ones, then, when valid, sized for admission (the input
// and the expected outputs that admission reserves on the spool). Promises checked: a
// refusal is INVALID_ARGUMENT or RESOURCE_EXHAUSTED naming a field; an accepted spec's
// sizes are the exact (unwrapped) sums of its request, within the limits; the admission
// size is at least the input and never wraps.
#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "google/protobuf/stubs/logging.h"
#include "fuzz/fuzz_targets.h"
#include "runner/disk_space.h"
#include "runner/job_spec.h"

namespace tomo::fuzz {
namespace {

namespace pb = ::tomoserve::v1;

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "broken promise: %s\n", what);
  std::abort();
}

void CheckUnder(const pb::JobSpec& spec, const server::ServerLimits& limits) {
  absl::StatusOr<server::ValidatedJob> job = server::ValidateJobSpec(spec, limits);
  if (!job.ok()) {
    const absl::StatusCode code = job.status().code();
    Require(code == absl::StatusCode::kInvalidArgument ||
                code == absl::StatusCode::kResourceExhausted,
            "a refused spec is INVALID_ARGUMENT or RESOURCE_EXHAUSTED");
    Require(absl::StrContains(job.status().message(), ": "), "a refusal names its field");
    return;
  }
  Require(job->input_bytes == spec.input().size_bytes(), "input_bytes is input.size_bytes");
  Require(job->input_bytes <= limits.max_upload_bytes, "the upload limit holds");
  if (spec.input().files_size() > 0) {
    unsigned __int128 sum = 0;  // wide: a wrapped uint64 sum would differ
    for (const pb::InputFile& file : spec.input().files()) sum += file.size_bytes();
    Require(sum == job->input_bytes, "the files add up to the input, without wrapping");
  }
  Require(static_cast<uint64_t>(job->request.volume.voxel_count()) <= limits.max_voxels,
          "the voxel limit holds");
  Require(!job->outputs.empty(), "outputs are never empty");
  absl::StatusOr<server::SpoolNeed> need = server::JobSpoolNeed(*job);
  Require(need.ok() || need.status().code() == absl::StatusCode::kResourceExhausted,
          "an admission size that does not fit is RESOURCE_EXHAUSTED");
  if (need.ok()) {
    Require(need->input_bytes == job->input_bytes, "admission counts the whole input");
    Require(need->total_bytes() >= need->input_bytes &&
                need->total_bytes() >= need->output_bytes,
            "admission's total does not wrap");
    Require(need->output_bytes >= static_cast<uint64_t>(job->request.volume.voxel_count()),
            "outputs take at least a byte per voxel");
  }
}

}  // namespace

int FuzzJobSpec(const uint8_t* data, size_t size) {
  // protobuf logs every string that is not UTF-8; at fuzzing rates that is the run.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  pb::JobSpec spec;
  if (!spec.ParseFromArray(data, static_cast<int>(size))) return 0;
  CheckUnder(spec, server::ServerLimits());
  server::ServerLimits small;
  small.max_upload_bytes = 1 << 20;
  small.max_voxels = 1 << 16;
  small.max_views = 64;
  small.max_iterations = 10;
  CheckUnder(spec, small);
  return 0;
}

}  // namespace tomo::fuzz

#ifdef TOMO_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tomo::fuzz::FuzzJobSpec(data, size);
}
#endif

// Fuzzes the DICOM-CT-PD reader (DCMTK's parser beneath it): one file, both the Submit-time
// header check and the full decode.
#include <cstdio>
#include <cstdlib>

#include "core/io/dicom_ct_pd_reader.h"
#include "dcmtk/config/osconfig.h"
#include "dcmtk/oflog/oflog.h"
#include "fuzz/fuzz_targets.h"

namespace tomo::fuzz {
namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "broken promise: %s\n", what);
  std::abort();
}

}  // namespace

int FuzzDicomCtPd(const uint8_t* data, size_t size) {
  // DCMTK reports every malformed element on stderr; at fuzzing rates that is the run.
  static const bool quiet = [] {
    OFLog::configure(OFLogger::FATAL_LOG_LEVEL);
    return true;
  }();
  (void)quiet;
  absl::StatusOr<core::DicomCtPdHeader> header = core::ParseDicomCtPdHeader(data, size, "fuzz.dcm");
  Require(header.ok() || header.status().code() == absl::StatusCode::kInvalidArgument,
          "header errors are INVALID_ARGUMENT");
  absl::StatusOr<core::DicomCtPdAcquisition> scan =
      core::DecodeDicomCtPd({core::DicomBytes{"fuzz.dcm", data, size}});
  Require(scan.ok() || scan.status().code() == absl::StatusCode::kInvalidArgument,
          "decode errors are INVALID_ARGUMENT");
  if (scan.ok()) {
    Require(scan->projections.dims() == scan->geometry.projection_dims(),
            "projections match the geometry");
    Require(header.ok(), "a file that decodes has a valid header");
  }
  return 0;
}

}  // namespace tomo::fuzz

#ifdef TOMO_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tomo::fuzz::FuzzDicomCtPd(data, size);
}
#endif

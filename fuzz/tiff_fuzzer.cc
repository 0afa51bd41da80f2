// Fuzzes the TIFF stack reader (libtiff beneath it): directory inspection and full decode.
#include <cstdio>
#include <cstdlib>

#include "core/io/tiff_stack_reader.h"
#include "fuzz/fuzz_targets.h"

namespace tomo::fuzz {
namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "broken promise: %s\n", what);
  std::abort();
}

}  // namespace

int FuzzTiff(const uint8_t* data, size_t size) {
  absl::StatusOr<core::TiffStackInfo> info = core::InspectTiff(data, size, "fuzz.tif");
  Require(info.ok() || info.status().code() == absl::StatusCode::kInvalidArgument,
          "inspect errors are INVALID_ARGUMENT");
  absl::StatusOr<core::Array3D> pages = core::DecodeTiff(data, size, "fuzz.tif");
  Require(pages.ok() || pages.status().code() == absl::StatusCode::kInvalidArgument,
          "decode errors are INVALID_ARGUMENT");
  if (pages.ok()) {
    Require(info.ok(), "a file that decodes inspects");
    Require(pages->dims() == core::Dims3{info->pages, info->rows, info->columns},
            "decoded pages match the inspection");
  }
  return 0;
}

}  // namespace tomo::fuzz

#ifdef TOMO_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tomo::fuzz::FuzzTiff(data, size);
}
#endif

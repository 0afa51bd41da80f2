// Fuzzes the raw stream decoder and the preprocessing after it. The first 4 bytes choose the
// layout (sample type, byte order, axis order) and small dims; the rest is the stream, so
// that both exact sizes and mismatches are explored. Decoded values then go through
// dark/flat correction (first view as flat) and the guarded -log.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/io/projection_preprocessing.h"
#include "core/io/raw_stream.h"
#include "fuzz/fuzz_targets.h"

namespace tomo::fuzz {
namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "broken promise: %s\n", what);
  std::abort();
}

}  // namespace

int FuzzRawStream(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  core::RawStreamLayout layout;
  layout.sample = (data[0] & 1) ? core::RawSampleType::kUint16 : core::RawSampleType::kFloat32;
  layout.byte_order = (data[0] & 2) ? core::RawByteOrder::kBigEndian
                                    : core::RawByteOrder::kLittleEndian;
  layout.order = (data[0] & 4) ? core::RawAxisOrder::kRowViewColumn
                               : core::RawAxisOrder::kViewRowColumn;
  layout.dims = {data[1] % 9, data[2] % 9, data[3] % 17};
  absl::StatusOr<core::Array3D> decoded =
      core::DecodeRawStream(data + 4, size - 4, layout, "fuzz.raw");
  Require(decoded.ok() || decoded.status().code() == absl::StatusCode::kInvalidArgument,
          "decode errors are INVALID_ARGUMENT");
  Require(!decoded.ok() || core::RawStreamBytes(layout) == size - 4, "only exact sizes decode");
  if (!decoded.ok() || decoded->size() == 0) return 0;
  Require(decoded->dims() == layout.dims, "decoded dims are the layout's");
  core::Array3D& values = *decoded;
  const core::Dims3 d = values.dims();
  core::Array3D flat({1, d.d1, d.d2});
  for (int64_t i = 0; i < d.d1 * d.d2; ++i) flat.data()[i] = values.data()[i];
  absl::Status corrected = core::ApplyDarkFlat(values, nullptr, flat);
  Require(corrected.ok() || corrected.code() == absl::StatusCode::kInvalidArgument,
          "dark/flat errors are INVALID_ARGUMENT");
  absl::StatusOr<int64_t> clamped = core::NegativeLog(values);
  Require(clamped.ok(), "-log with the default floor succeeds");
  for (int64_t i = 0; i < values.size(); ++i) {
    // The guard: nothing below the floor reaches the logarithm, so no NaN and no +inf.
    Require(!std::isnan(values.data()[i]) && values.data()[i] <= 13.9f,
            "-log output is at most -ln(1e-6)");
  }
  return 0;
}

}  // namespace tomo::fuzz

#ifdef TOMO_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tomo::fuzz::FuzzRawStream(data, size);
}
#endif

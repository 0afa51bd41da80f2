// Raw projection streams as detectors and acquisition software write them: float32 or
// uint16 samples, little- or big-endian, stored view-row-column (one projection after
// another, ours) or row-view-column (one sinogram per detector row, as some synchrotron
// pipelines write), decoded into Array3D (views, rows, columns) float32.
//
// Decoding converts values only (byte order, integer to float); it does not interpret them:
// uint16 detector counts stay counts until projection_preprocessing.h turns them into line
// integrals. The bytes come from memory (a spooled upload holds several files back to back)
// or from a file at an offset.
//
// Errors are INVALID_ARGUMENT naming the source (a file name or "input"), e.g.
//   "scan.raw: 1000 bytes, expected 1048576 bytes for uint16 big-endian (views, rows,
//    columns) = (64, 64, 128)"
//   "scan.raw: float32 value at (view 3, row 0, column 17) is NaN; values must be finite"
//
//   RawStreamLayout layout{RawSampleType::kUint16, RawByteOrder::kBigEndian,
//                          RawAxisOrder::kRowViewColumn, {views, rows, columns}};
//   TOMO_ASSIGN_OR_RETURN(Array3D counts, DecodeRawStream(bytes, size, layout, "scan.raw"));
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/array3d.h"

namespace tomo::core {

enum class RawSampleType { kFloat32, kUint16 };
enum class RawByteOrder { kLittleEndian, kBigEndian };
// kViewRowColumn: index = (view * rows + row) * columns + column (Array3D's own order).
// kRowViewColumn: index = (row * views + view) * columns + column (a sinogram per row).
enum class RawAxisOrder { kViewRowColumn, kRowViewColumn };

struct RawStreamLayout {
  RawSampleType sample = RawSampleType::kFloat32;
  RawByteOrder byte_order = RawByteOrder::kLittleEndian;
  RawAxisOrder order = RawAxisOrder::kViewRowColumn;
  Dims3 dims;  // (views, rows, columns) of the decoded array, whatever the stored order
};

int64_t RawSampleBytes(RawSampleType sample);
// Bytes the stream must have: views x rows x columns x sample bytes (0 for negative dims,
// kRawStreamBytesOverflow when the product does not fit 64 bits).
inline constexpr uint64_t kRawStreamBytesOverflow = ~uint64_t{0};
uint64_t RawStreamBytes(const RawStreamLayout& layout);
// "uint16 big-endian row-view-column", for messages.
std::string RawLayoutText(const RawStreamLayout& layout);

// Decodes exactly RawStreamBytes(layout) bytes. INVALID_ARGUMENT on negative dims, dims
// whose size does not fit 64 bits, a size mismatch (naming both sizes) or a float32 value
// that is NaN or infinite (naming its view, row and column).
absl::StatusOr<Array3D> DecodeRawStream(const void* bytes, size_t size_bytes,
                                        const RawStreamLayout& layout,
                                        absl::string_view source_name);

// The same from size_bytes bytes of a file starting at offset (a spooled upload).
// NOT_FOUND when the file cannot be opened; INVALID_ARGUMENT when the file is shorter than
// offset + size_bytes; then as DecodeRawStream.
absl::StatusOr<Array3D> ReadRawStream(const std::string& path, uint64_t offset,
                                      uint64_t size_bytes, const RawStreamLayout& layout,
                                      absl::string_view source_name);

}  // namespace tomo::core

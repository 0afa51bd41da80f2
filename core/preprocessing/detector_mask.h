// DetectorMask: which detector pixels cannot be trusted (dead, stuck, hot, masked), one
// flag per pixel of a (rows, columns) detector, and how to find them from the dark and
// flat fields.
//
// A pixel is bad when its gain G = flat - dark is not a finite number above 0 (a dead or
// masked pixel: its readings carry no signal), or when G lies outside
// [m / gain_outlier_ratio, m * gain_outlier_ratio], m the median gain of its 5 x 5
// neighbourhood (5 x 1 on a one-row detector): a pixel that answers the beam far more or
// far less than its neighbours (stuck, hot or half-dead). The local median follows a flat
// field's slow beam profile, so a bright centre and dim edges are not outliers.
//
//   TOMO_ASSIGN_OR_RETURN(DetectorMask mask, BadPixelsFromFields(&dark, flat, {}));
//   mask.Merge(given);  // a mask file's pixels too
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/array3d.h"

namespace tomo::core {

inline constexpr double kDefaultGainOutlierRatio = 3.0;

class DetectorMask {
 public:
  DetectorMask() = default;
  DetectorMask(int64_t rows, int64_t columns)
      : rows_(rows), columns_(columns), bad_(static_cast<size_t>(rows * columns), 0) {}

  // From one frame of rows x columns bytes, row by row, non-zero meaning bad (a mask file).
  // INVALID_ARGUMENT (naming `name`) when the byte count is not rows x columns.
  static absl::StatusOr<DetectorMask> FromBytes(const unsigned char* bytes, size_t size,
                                                int64_t rows, int64_t columns,
                                                absl::string_view name);

  int64_t rows() const { return rows_; }
  int64_t columns() const { return columns_; }
  bool empty() const { return bad_.empty(); }
  bool bad(int64_t pixel) const { return bad_[static_cast<size_t>(pixel)] != 0; }
  void Mark(int64_t pixel) { bad_[static_cast<size_t>(pixel)] = 1; }
  int64_t CountBad() const;
  // Marks every pixel bad in `other` too (same shape; an empty mask adds nothing).
  void Merge(const DetectorMask& other);

 private:
  int64_t rows_ = 0, columns_ = 0;
  std::vector<unsigned char> bad_;
};

// The bad pixels of the dark and flat fields, (1, rows, columns) frames (dark may be null:
// 0). INVALID_ARGUMENT when gain_outlier_ratio is not a finite number > 1 or the frames'
// shapes differ.
absl::StatusOr<DetectorMask> BadPixelsFromFields(const Array3D* dark, const Array3D& flat,
                                                 double gain_outlier_ratio);

}  // namespace tomo::core

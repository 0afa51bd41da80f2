// The grey-level window of the previews and of the DICOM series' default display: which
// range of volume values maps from black to white.
//
// Robust by default: the 1st and 99th percentiles of the values of the three central
// orthogonal slices together (the slices a preview shows; a few hot or cold voxels, or the
// empty air around an object, then do not wash the image out). A flat set of values gets a
// window of width 1 about that value, so that the window is never empty.
//
//   DisplayWindow window = RobustDisplayWindow(volume);      // or a caller's {lower, upper}
//   uint8_t grey = window.Grey(value);
#pragma once

#include <cstdint>

#include "core/data/array3d.h"

namespace tomo::core {

struct DisplayWindow {
  double lower = 0;  // values <= lower are black
  double upper = 1;  // values >= upper are white; upper > lower
  // Linear in between, rounded to the nearest of 0..255.
  uint8_t Grey(double value) const;
};

inline constexpr double kWindowLowerPercentile = 1.0;
inline constexpr double kWindowUpperPercentile = 99.0;

// The robust window above. The volume must not be empty.
DisplayWindow RobustDisplayWindow(const Array3D& volume);

}  // namespace tomo::core

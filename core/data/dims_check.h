// The one check, and the one message, for arrays whose dims must match what a geometry
// says, so that every operator and algorithm refuses a mismatch with the same words:
//   "projections: dims (720, 1, 700) do not match the geometry's (720, 1, 768)
//    (views, rows, detectors)"
//
//   TOMO_RETURN_IF_ERROR(CheckDimsMatch("volume", volume.dims(), geometry.dims(), "(z, y, x)"));
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/data/array3d.h"

namespace tomo::core {

// "(d0, d1, d2)".
std::string DimsText(const Dims3& dims);

// INVALID_ARGUMENT with the message above when actual != expected, else OK.
absl::Status CheckDimsMatch(absl::string_view what, const Dims3& actual, const Dims3& expected,
                            absl::string_view axes);

}  // namespace tomo::core

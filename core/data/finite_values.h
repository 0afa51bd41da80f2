// The first value that is not finite (NaN or infinite) in a float array: every input is
// checked before it is reconstructed, and a tomod job's input is gigabytes, so large
// arrays are searched in blocks on several threads (the lowest index found wins).
//
//   const int64_t bad = FirstNonFiniteIndex(projections.data(), projections.size());
//   if (bad >= 0) return absl::InvalidArgumentError(absl::StrCat("value at index ", bad, ...));
#pragma once

#include <cstdint>

namespace tomo::core {

// The smallest i < count with values[i] not finite, or -1 when all are finite.
int64_t FirstNonFiniteIndex(const float* values, int64_t count);

}  // namespace tomo::core

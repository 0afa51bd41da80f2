// The nearest of some names to a mistyped one, for "did you mean" hints in error messages.
//
// Distance: Levenshtein edits between the lower-cased strings; a candidate also matches by
// its suffix after `strip_prefix` (so "flat" finds "DETECTOR_SHAPE_FLAT"). A candidate is
// offered only when the edits are at most a third of the longer name's length (and at
// least 1 allowed), so that unrelated names are not suggested.
//
//   NearestName("iteratons", {"iterations", "relaxation"})  ->  "iterations"
//   NearestName("flat", {"DETECTOR_SHAPE_FLAT"}, "DETECTOR_SHAPE_")  ->  "DETECTOR_SHAPE_FLAT"
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tomo::client {

size_t EditDistance(absl::string_view a, absl::string_view b);

std::optional<std::string> NearestName(absl::string_view wanted,
                                       const std::vector<std::string>& candidates,
                                       absl::string_view strip_prefix = "");

}  // namespace tomo::client

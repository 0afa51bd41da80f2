#include "core/data/dims_check.h"

#include "absl/strings/str_cat.h"

namespace tomo::core {

std::string DimsText(const Dims3& dims) {
  return absl::StrCat("(", dims.d0, ", ", dims.d1, ", ", dims.d2, ")");
}

absl::Status CheckDimsMatch(absl::string_view what, const Dims3& actual, const Dims3& expected,
                            absl::string_view axes) {
  if (actual == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": dims ", DimsText(actual),
                                                 " do not match the geometry's ",
                                                 DimsText(expected), " ", axes));
}

}  // namespace tomo::core

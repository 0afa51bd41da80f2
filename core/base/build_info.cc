#include "core/base/build_info.h"

#include "absl/strings/str_cat.h"
#include "core/base/build_commit.h"  // generated at build time: TOMO_BUILD_COMMIT

#ifndef TOMO_VERSION
#error "TOMO_VERSION is set by core/CMakeLists.txt"
#endif

namespace tomo::core {

const char* TomoVersion() { return TOMO_VERSION; }

std::string BuildDescription() {
  return absl::StrCat(TOMO_VERSION, " (commit ", TOMO_BUILD_COMMIT, ", ",
                      TOMO_BUILD_TYPE, ", ", TOMO_BUILD_BACKENDS, ")");
}

}  // namespace tomo::core

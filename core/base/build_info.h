// The one version string of tomoserve and a line about the build, shared by `tomo` and
// `tomod` (their --version) and by tomod's ServerInfo.version.
//
//   TomoVersion()       "0.1.0"  (the CMake project's version)
//   BuildDescription()  "0.1.0 (commit 86081d3, RelWithDebInfo, CUDA sm_90)"
//
// The commit is the source tree's HEAD when the binary was built (with "-dirty" when it had
// uncommitted changes), "unknown" outside a git checkout.
#pragma once

#include <string>

namespace tomo::core {

const char* TomoVersion();
std::string BuildDescription();

}  // namespace tomo::core

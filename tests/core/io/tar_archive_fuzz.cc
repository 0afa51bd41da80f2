// libFuzzer target for the tar parser (core/io/tar_archive.h, ForEachTarEntry): what
// `tomo fetch --format dicom` runs on bytes from a server. Any input must end in OK or an
// error status, never a crash, a hang or an allocation beyond the input's size; every entry
// it accepts has a name CheckName allows.
//
// Built by hand with Debian's clang (not part of the CMake build):
//   clang++-14 -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -I. \
//     tests/core/io/tar_archive_fuzz.cc core/io/tar_archive.cc core/io/durable_file.cc \
//     -labsl_status -labsl_strings -labsl_str_format_internal ... -o tar_archive_fuzz
//   ./tar_archive_fuzz -max_total_time=300 corpus/
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "core/io/tar_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  size_t total = 0;
  const absl::Status status = tomo::core::ForEachTarEntry(
      in, "fuzz.tar", [&](const std::string& name, std::string bytes) -> absl::Status {
        if (name.empty() || name.size() > 100 || name[0] == '/' ||
            ("/" + name + "/").find("/../") != std::string::npos) {
          std::abort();  // CheckName must have refused it
        }
        total += bytes.size();
        if (total > size) std::abort();  // entries cannot hold more than the input
        return absl::OkStatus();
      });
  (void)status;
  return 0;
}

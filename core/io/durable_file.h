// Files that appear whole or not at all: written under a temporary name in the same
// directory, fsynced, then renamed over the final name. Every output writer of core/io
// goes through these, so that a reader (tomod's Fetch, a viewer) never sees half a file and
// a crash after the rename loses nothing.
//
//   TOMO_RETURN_IF_ERROR(WriteFileDurably("/results/volume.mha", header + data));
//   const std::string temporary = TemporaryPathFor("/results/volume.nii.gz");  // keeps .nii.gz
//   ... a library writes temporary ...
//   TOMO_RETURN_IF_ERROR(SyncAndRename(temporary, "/results/volume.nii.gz"));
//
// Errors: INTERNAL (or the errno's code) naming the path and the failing step.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tomo::core {

// A name next to path that keeps path's extensions (libraries that pick the format from
// the name, as niftilib with .nii.gz, see the same format): "dir/.tmp-<pid>-<n>-name".
std::string TemporaryPathFor(const std::string& path);

// fsyncs temporary, renames it to path and fsyncs the directory. Removes temporary on error.
absl::Status SyncAndRename(const std::string& temporary, const std::string& path);

// When a file of one piece goes to tmpfs through a shared mapping copied by several threads
// rather than one write() (tmpfs serialises a file's writes; see durable_file.cc).
struct ParallelWrite {
  size_t min_bytes = size_t{64} << 20;
  int threads = 8;
};

// Writes the pieces, one after another, as the file path (through a temporary file).
// Errors name the temporary file and the failing step; on the parallel path a full tmpfs
// (or a file-size limit) is RESOURCE_EXHAUSTED ("cannot reserve space for ..."), never a
// SIGBUS: each thread populates its range first (core/io/mapped_range.h).
absl::Status WriteFileDurably(const std::string& path, absl::string_view bytes,
                              const ParallelWrite& parallel = {});
absl::Status WriteFileDurably(const std::string& path, absl::string_view head,
                              absl::string_view tail);

}  // namespace tomo::core

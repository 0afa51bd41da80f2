// What a job needs on the spool, and what the spool's file system has free: the numbers
// admission (JobManager::BeginUpload) reserves before it takes a byte of an upload, so
// that an accepted job never fails for want of room to write its results.
//
// A job's need is its input (input.size_bytes) plus an upper bound of its outputs, known
// from the spec: per OutputFormat, from the volume's voxel count v and size (x, y, z):
//   RAW_FLOAT32      4 v + 64 KiB (the JSON sidecar)
//   NIFTI, METAIMAGE 4 v + 64 KiB (the header)
//   NIFTI_GZ         4 v + v / 256 + 64 KiB (deflate's worst case on data that does not
//                    compress)
//   DICOM_CT_SERIES  2 (2 v + 16 KiB z) + 64 KiB: int16 slices with their headers, written
//                    to a scratch folder and then into the tar, both on the spool at once
//   PNG_PREVIEW      2 (xy + yz + xz) + 3 x 64 KiB
// The sums use checked arithmetic; a need past 2^64 is RESOURCE_EXHAUSTED.
//
// Thread-safe (pure functions and a statvfs(2)).
//
//   TOMO_ASSIGN_OR_RETURN(SpoolNeed need, JobSpoolNeed(validated));
//   TOMO_ASSIGN_OR_RETURN(uint64_t free_bytes, FileSystemFreeBytes(spool.root()));
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "runner/job_spec.h"

namespace tomo::server {

struct SpoolNeed {
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;  // the bound above, summed over the job's outputs
  uint64_t total_bytes() const { return input_bytes + output_bytes; }  // checked when made
};

absl::StatusOr<SpoolNeed> JobSpoolNeed(const ValidatedJob& job);

// The expected outputs alone (SpoolNeed::output_bytes).
absl::StatusOr<uint64_t> ExpectedOutputBytes(const ValidatedJob& job);

// Bytes an unprivileged process may still write on the file system holding path
// (statvfs: f_bavail x f_frsize). INTERNAL naming the path and errno when statvfs fails.
absl::StatusOr<uint64_t> FileSystemFreeBytes(const std::string& path);

}  // namespace tomo::server

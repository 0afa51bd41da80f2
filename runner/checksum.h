// CRC-32 (the IEEE polynomial of zlib, gzip and PNG) as the wire contract uses it for
// uploads and results.
//
//   uint32_t crc = Crc32Update(0, data.data(), data.size());   // 0 starts a checksum
//   crc = Crc32Update(crc, more.data(), more.size());
//   TOMO_ASSIGN_OR_RETURN(FileChecksum sum, Crc32OfFile("/spool/jobs/x/results/volume.raw"));
//
// Thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "transfer/crc32.h"

namespace tomo::server {

// The wire contract's CRC-32 (transfer/crc32.h), under the names tomod's code uses.
using transfer::Crc32OfBuffer;
using transfer::Crc32Update;

struct FileChecksum {
  uint64_t size_bytes = 0;
  uint32_t crc32 = 0;
};

// Reads the whole file. NOT_FOUND when it cannot be opened, DATA_LOSS on a read error,
// both naming the path. With sync, the file is also fsynced (INTERNAL when that fails).
absl::StatusOr<FileChecksum> Crc32OfFile(const std::string& path, bool sync = false);

}  // namespace tomo::server

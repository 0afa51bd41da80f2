// The CRC-32 of the wire contract (UploadEnd.crc32, FetchResultResponse.crc32): the IEEE
// polynomial of zlib, gzip and PNG, computed with ISA-L (combined with zlib). Both ends of the wire use these, so
// the client and tomod agree by construction.
//
//   uint32_t crc = Crc32Update(0, data.data(), data.size());   // 0 starts a checksum
//   crc = Crc32Update(crc, more.data(), more.size());
//   crc = Crc32Combine(crc, crc_of_next_block, next_block_size);  // blocks summed apart
//
// Thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tomo::transfer {

// Continues crc over size bytes; Crc32Update(0, ...) starts a new checksum.
uint32_t Crc32Update(uint32_t crc, const void* data, size_t size);

// The CRC-32 of A followed by B, from crc_a, crc_b and B's length.
uint32_t Crc32Combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b);

// The CRC-32 of a whole buffer, in 16 MiB blocks on several threads for large buffers (a
// volume is gigabytes): the same value as Crc32Update(0, ...).
uint32_t Crc32OfBuffer(const void* data, size_t size);

}  // namespace tomo::transfer

#include "transfer/crc32.h"

#include <isa-l/crc.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace tomo::transfer {

uint32_t Crc32Update(uint32_t crc, const void* data, size_t size) {
  // ISA-L's reflected IEEE CRC is zlib's crc32, continuation included (crc32_test checks
  // it against zlib); its buffer length is 64-bit.
  return crc32_gzip_refl(crc, static_cast<const unsigned char*>(data), size);
}

uint32_t Crc32Combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b) {
  return static_cast<uint32_t>(crc32_combine64(crc_a, crc_b, static_cast<z_off64_t>(size_b)));
}

uint32_t Crc32OfBuffer(const void* data, size_t size) {
  constexpr size_t kBlock = size_t{16} << 20;
  if (size <= kBlock) return Crc32Update(0, data, size);
  const size_t blocks = (size + kBlock - 1) / kBlock;
  std::vector<uint32_t> crcs(blocks);
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t b; (b = next.fetch_add(1)) < blocks;) {
      const size_t offset = b * kBlock;
      crcs[b] = Crc32Update(0, bytes + offset, std::min(kBlock, size - offset));
    }
  };
  const size_t threads =
      std::min<size_t>(blocks, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  uint32_t crc = crcs[0];
  for (size_t b = 1; b < blocks; ++b) {
    crc = Crc32Combine(crc, crcs[b], std::min(kBlock, size - b * kBlock));
  }
  return crc;
}

}  // namespace tomo::transfer

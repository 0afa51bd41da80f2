// Tests of runner/checksum.cc: the blocked, multi-threaded CRC-32 of a buffer equals zlib's
// running CRC over the same bytes, for sizes around the block size (16 MiB) and beyond.
#include "runner/checksum.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tomo::server {
namespace {

TEST(ChecksumTest, BufferChecksumEqualsTheRunningChecksum) {
  std::mt19937_64 random(20261122);
  constexpr size_t kBlock = size_t{16} << 20;
  std::vector<unsigned char> bytes(3 * kBlock + 7);
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(random());
  for (size_t size : {size_t{0}, size_t{1}, size_t{4096}, kBlock, kBlock + 1, 2 * kBlock - 1,
                      3 * kBlock + 7}) {
    SCOPED_TRACE(::testing::Message() << size << " bytes");
    EXPECT_EQ(Crc32OfBuffer(bytes.data(), size), Crc32Update(0, bytes.data(), size));
  }
  // The known value of "123456789" (the CRC-32 check value).
  EXPECT_EQ(Crc32OfBuffer("123456789", 9), 0xCBF43926u);
}

}  // namespace
}  // namespace tomo::server

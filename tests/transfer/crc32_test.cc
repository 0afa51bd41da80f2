#include "transfer/crc32.h"

#include <zlib.h>

#include <algorithm>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "tests/transfer/random_bytes.h"

namespace tomo::transfer {
namespace {

uint32_t ZlibCrc(const std::string& bytes) {
  return static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

TEST(Crc32Test, KnownValueOfTheCheckString) {
  // The CRC-32/ISO-HDLC check value of "123456789".
  EXPECT_EQ(Crc32Update(0, "123456789", 9), 0xCBF43926u);
}

TEST(Crc32Test, BufferInParallelBlocksEqualsOnePassForOddSizes) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  for (size_t size : {size_t{0}, size_t{1}, size_t{16} << 20, (size_t{16} << 20) + 1,
                      (size_t{53} << 20) + 12345}) {
    const std::string bytes = RandomBytes(rng, size);
    EXPECT_EQ(Crc32OfBuffer(bytes.data(), bytes.size()), ZlibCrc(bytes)) << "size " << size;
  }
}

// Continuing a checksum over pieces of every alignment and length (ISA-L's folding code
// takes other paths for short, unaligned and long pieces) gives zlib's value.
TEST(Crc32Test, UpdateInRandomPiecesEqualsZlib) {
  std::mt19937_64 rng(TestSeed() + 2);
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  const std::string bytes = RandomBytes(rng, (size_t{3} << 20) + 777);
  uint32_t crc = 0;
  for (size_t at = 0; at < bytes.size();) {
    const size_t piece = std::min<size_t>(bytes.size() - at, rng() % 3 == 0 ? rng() % 64 : rng() % 300000);
    crc = Crc32Update(crc, bytes.data() + at, piece);
    at += piece;
  }
  EXPECT_EQ(crc, ZlibCrc(bytes));
}

TEST(Crc32Test, CombineOfTwoPartsEqualsTheWhole) {
  std::mt19937_64 rng(TestSeed() + 1);
  const std::string bytes = RandomBytes(rng, 100003);
  for (size_t cut : {size_t{0}, size_t{1}, size_t{4096}, size_t{99999}, bytes.size()}) {
    const uint32_t a = Crc32Update(0, bytes.data(), cut);
    const uint32_t b = Crc32Update(0, bytes.data() + cut, bytes.size() - cut);
    EXPECT_EQ(Crc32Combine(a, b, bytes.size() - cut), ZlibCrc(bytes)) << "cut " << cut;
  }
}

}  // namespace
}  // namespace tomo::transfer

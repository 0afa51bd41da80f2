#include "proto/transfer/crc32.h"

#include <zlib.h>

#include <random>
#include <string>

#include "gtest/gtest.h"
#include "tests/proto/transfer/random_bytes.h"

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

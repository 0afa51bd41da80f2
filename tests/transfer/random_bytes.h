// Fresh random bytes for the transfer tests (a new seed each run, printed on failure).
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace tomo::transfer {

inline uint64_t TestSeed() {
  static const uint64_t seed = std::random_device{}();
  return seed;
}

inline std::string RandomBytes(std::mt19937_64& rng, size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    const uint64_t word = rng();
    for (size_t k = 0; k < 8 && i + k < size; ++k) bytes[i + k] = static_cast<char>(word >> (8 * k));
  }
  return bytes;
}

}  // namespace tomo::transfer

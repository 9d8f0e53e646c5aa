// 64-bit content hashes for cache keys and on-disk integrity checks (not cryptographic).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace tileops::jit {
// Stable across processes and builds (FNV-1a based, with a final avalanche mix).
uint64_t hash64(std::string_view data, uint64_t seed = 0);
// Combines several parts unambiguously (each part is length-prefixed).
class Hasher {
 public:
  Hasher& add(std::string_view part);
  Hasher& add(uint64_t value);
  uint64_t digest() const;
  std::string hex() const;  // 16 lowercase hex digits
 private:
  uint64_t state_ = 0x6a09e667f3bcc908ull;
};
}  // namespace tileops::jit

#include "jit/hash.h"

#include <cstdio>

namespace tileops::jit {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

uint64_t fnv(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

// Byte order is fixed (little-endian) so that digests do not depend on the host.
uint64_t fnv_u64(uint64_t h, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  return fnv(h, b, 8);
}

// FNV-1a alone mixes the last bytes poorly; this finaliser (MurmurHash3's fmix64) spreads them.
uint64_t avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

}  // namespace

uint64_t hash64(std::string_view data, uint64_t seed) {
  return avalanche(fnv(fnv_u64(kFnvOffset, seed), data.data(), data.size()));
}

// Each part gets a type tag and a length prefix, so ("ab","c") and ("a","bc") differ.
Hasher& Hasher::add(std::string_view part) {
  state_ = fnv(state_, "s", 1);
  state_ = fnv_u64(state_, part.size());
  state_ = fnv(state_, part.data(), part.size());
  return *this;
}

Hasher& Hasher::add(uint64_t value) {
  state_ = fnv(state_, "u", 1);
  state_ = fnv_u64(state_, value);
  return *this;
}

uint64_t Hasher::digest() const { return avalanche(state_); }

std::string Hasher::hex() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(digest()));
  return buf;
}

}  // namespace tileops::jit

// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104) for authenticating kernel cache entries.
// Written here rather than taken from libcrypto: the library must build where no OpenSSL headers
// are installed (the GPU machines have no package registry) and must not add a load-time
// dependency; the code is tested against the FIPS and RFC 4231 vectors (tests/jit/test_sha256.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tileops::jit {

using Digest256 = std::array<unsigned char, 32>;

class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view data);
  Digest256 finish();  // the object is spent afterwards

 private:
  void block(const unsigned char* p);
  uint32_t h_[8];
  unsigned char buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

// HMAC-SHA-256 over a message given in parts.
class HmacSha256 {
 public:
  explicit HmacSha256(std::string_view key);
  HmacSha256& update(std::string_view data) {
    inner_.update(data);
    return *this;
  }
  Digest256 finish();

 private:
  Sha256 inner_, outer_;
};

Digest256 sha256(std::string_view data);
Digest256 hmac_sha256(std::string_view key, std::string_view message);
std::string to_hex(const Digest256& d);
// Compares in time independent of where the digests differ.
bool digests_equal(const unsigned char* a, const unsigned char* b, size_t n);

}  // namespace tileops::jit

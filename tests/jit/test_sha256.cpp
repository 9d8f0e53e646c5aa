#include "jit/sha256.h"

#include <gtest/gtest.h>

#include <string>

using namespace tileops::jit;

// FIPS 180-4 examples (NIST CSRC "SHA-256" example values) and the long message of FIPS 180-2.
TEST(Sha256, FipsVectors) {
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(to_hex(sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecewiseUpdatesMatchOneShot) {
  std::string msg;
  for (int i = 0; i < 300; ++i) msg += static_cast<char>(i * 7);
  // Every split point, so the buffered tail meets every block offset (including 55/56/64).
  for (size_t split = 0; split <= msg.size(); split += 1) {
    Sha256 h;
    h.update(std::string_view(msg).substr(0, split)).update(std::string_view(msg).substr(split));
    ASSERT_EQ(to_hex(h.finish()), to_hex(sha256(msg))) << split;
  }
}

// RFC 4231 test cases 1-4, 6, 7 (5 is a truncated output: its first 16 bytes are checked).
TEST(HmacSha256, Rfc4231Vectors) {
  EXPECT_EQ(to_hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(to_hex(hmac_sha256(std::string(20, '\xaa'), std::string(50, '\xdd'))),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  EXPECT_EQ(to_hex(hmac_sha256(key4, std::string(50, '\xcd'))),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  EXPECT_EQ(to_hex(hmac_sha256(std::string(20, '\x0c'), "Test With Truncation")).substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
  EXPECT_EQ(to_hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(to_hex(hmac_sha256(std::string(131, '\xaa'),
                               "This is a test using a larger than block-size key and a larger than block-size data. "
                               "The key needs to be hashed before being used by the HMAC algorithm.")),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(HmacSha256, StreamingMatchesOneShotAndKeyMatters) {
  const std::string key(32, '\x42'), msg = "header|identity|payload";
  EXPECT_EQ(to_hex(HmacSha256(key).update("header|").update("identity|").update("payload").finish()),
            to_hex(hmac_sha256(key, msg)));
  EXPECT_NE(to_hex(hmac_sha256(key, msg)), to_hex(hmac_sha256(std::string(32, '\x43'), msg)));
  const Digest256 a = sha256("x"), b = sha256("x"), c = sha256("y");
  EXPECT_TRUE(digests_equal(a.data(), b.data(), a.size()));
  EXPECT_FALSE(digests_equal(a.data(), c.data(), a.size()));
}

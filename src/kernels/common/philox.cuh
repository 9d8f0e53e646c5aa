// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3", SC 2011),
// the counter-based generator of cuRAND and Random123: four 32-bit words from a 128-bit counter and
// a 64-bit key, with no state between calls, so element i's word is a pure function of (key, i).
// Plain C++ as well as CUDA: the reference target computes the same words on the host
// (docs/CONTRACT.md §11); a GoogleTest checks Random123's known answers.
#pragma once

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define TILEOPS_PHILOX_FN __host__ __device__ __forceinline__
#define TILEOPS_PHILOX_UNROLL _Pragma("unroll")
#else
#define TILEOPS_PHILOX_FN inline
#define TILEOPS_PHILOX_UNROLL
#endif

namespace tileops {

struct Philox4 {
  unsigned w[4];
};

// counter (c0 lowest word) and key (k0 lowest); unsigned is 32 bits on both sides.
TILEOPS_PHILOX_FN Philox4 philox4x32_10(unsigned c0, unsigned c1, unsigned c2, unsigned c3, unsigned k0,
                                        unsigned k1) {
  TILEOPS_PHILOX_UNROLL
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key schedule: Weyl increments by the golden ratio and sqrt(3) - 1
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const unsigned long long p0 = 0xD2511F53ull * c0;
    const unsigned long long p1 = 0xCD9E8D57ull * c2;
    const unsigned n0 = static_cast<unsigned>(p1 >> 32) ^ c1 ^ k0;
    const unsigned n2 = static_cast<unsigned>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<unsigned>(p1);
    c3 = static_cast<unsigned>(p0);
    c0 = n0;
    c2 = n2;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// The four words of group g (elements 4g .. 4g + 3) of the stream of `seed`.
TILEOPS_PHILOX_FN Philox4 philox_group(unsigned long long seed, unsigned long long g) {
  return philox4x32_10(static_cast<unsigned>(g), static_cast<unsigned>(g >> 32), 0u, 0u,
                       static_cast<unsigned>(seed), static_cast<unsigned>(seed >> 32));
}

}  // namespace tileops

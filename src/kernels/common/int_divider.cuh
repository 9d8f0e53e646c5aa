// Division of a 32-bit index by a divisor fixed for a whole launch as a multiply-high, an add and a
// shift (Granlund and Montgomery's round-up method): the host makes the IntDivider once a call, the
// kernel divides with it many times. Exact for dividends below 2^31 and divisors from 1 to 2^31.
// make_int_divider is plain host C++, shared by the library and the host-compiled kernel tests.
#pragma once

namespace tileops {

struct IntDivider {
  unsigned magic;
  unsigned shift;
};

#if !defined(__CUDACC_RTC__)
// shift = ceil(log2 d), magic = floor(2^32 * (2^shift - d) / d) + 1 (below 2^32 for every d <= 2^31).
inline IntDivider make_int_divider(unsigned d) {
  unsigned shift = 0;
  while ((1ull << shift) < d) ++shift;
  const unsigned long long magic = ((1ull << 32) * ((1ull << shift) - d)) / d + 1;
  return IntDivider{static_cast<unsigned>(magic), shift};
}
#endif

#if defined(__CUDACC_RTC__) || defined(__CUDA_ARCH__)
__device__ __forceinline__ unsigned int_divide(unsigned n, IntDivider v) { return (__umulhi(n, v.magic) + n) >> v.shift; }
#else
inline unsigned int_divide(unsigned n, IntDivider v) {
  const unsigned high = static_cast<unsigned>((static_cast<unsigned long long>(n) * v.magic) >> 32);
  return (high + n) >> v.shift;
}
#endif

}  // namespace tileops

// The online softmax step of attention on m16n8k16 MMAs (decode_mma.cuh, prefill.cuh): a warp's 16
// query rows, this lane's rows lane / 4 and lane / 4 + 8 (the C fragment's), base 2, float32.
#pragma once

namespace tileops {
namespace mma {

// Takes a tile's scores s (NS n8 tiles, already scaled to base 2, masked entries -inf) and mx, their
// maxima over this lane's entries of each row; finishes the maxima over the quad holding the row,
// rescales the running maximum m, sum l and accumulators acc to them, and turns s into
// p = exp2(s - max), added to l (this lane's share: the quad sums l at the end).
template <int NS, int NT>
__device__ __forceinline__ void online_softmax_step(float (&s)[NS][4], float (&mx)[2], float (&m)[2], float (&l)[2],
                                                    float (&acc)[NT][4]) {
  const float neg_inf = __int_as_float(0xff800000);
  float base[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float mn = fmaxf(m[h], mx[h]);
    base[h] = mn == neg_inf ? 0.f : mn;  // no key yet: every p is 0 either way
    const float c = exp2f(m[h] - base[h]);
    l[h] *= c;
#pragma unroll
    for (int n = 0; n < NT; ++n) acc[n][2 * h] *= c, acc[n][2 * h + 1] *= c;
    m[h] = mn;
  }
#pragma unroll
  for (int j = 0; j < NS; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[j][e] = exp2f(s[j][e] - base[e / 2]);
      l[e / 2] += s[j][e];
    }
}

}  // namespace mma
}  // namespace tileops

// MaxPool{1,2,3}dIndicesFwdOp and AdaptiveMaxPool2dIndicesFwdOp: max pools that also write each
// output's int64 index within its input plane (the spatial dims flattened row-major), as torch's
// return_indices=True. One thread an output on pool_fwd.cuh's walk (pool_items: grid-stride, with
// int index math the coordinates split by multiply-high dividers); W is a small window written into
// the code (taps unrolled, unchecked where the window lies inside the input) or the call's window
// (loops). Taps are scanned in row-major order and a larger value or a NaN takes over (torch's
// `val > max || isnan(val)`): of equal maxima the first is kept, of NaNs the last; the index starts
// at the window's first tap inside the input (torch steps a negative start by the dilation).
#pragma once
#include "pool/pool_fwd.cuh"

namespace tileops {

template <typename T, typename I, int R, bool ADAPTIVE, class W = PoolWindowOfCall>
__global__ void pool_max_indices_fwd(const T* __restrict__ x, T* __restrict__ y, long long* __restrict__ indices,
                                     long long outputs, PoolGeometry geometry, PoolDividers dividers) {
  static_assert(R >= 1 && R <= 3, "pool_max_indices_fwd pools 1, 2 or 3 trailing dims");
  static_assert(!(ADAPTIVE && W::kFixed), "adaptive bins have no fixed window");
  constexpr int F = 3 - R;  // first dim used
  pool_items<I, R, kPoolMax, ADAPTIVE, W, 1>(geometry, outputs, dividers, [&](I idx, const PoolSite<I>& s,
                                                                               const PoolDims<I>& g, I plane_size) {
    const T* base = x + s.plane * plane_size;
    float best = -__int_as_float(0x7f800000);
    I at;
    auto take = [&](I i, const T v) {
      const float f = to_float(v);
      if (f > best || f != f) {
        best = f;
        at = i;
      }
    };
    if constexpr (W::kFixed) {
      I first[3] = {0, 0, 0};
#pragma unroll
      for (int j = F; j < 3; ++j)
        first[j] = s.start[j] < 0 ? s.start[j] + (-s.start[j] + W::dil(j) - 1) / W::dil(j) * W::dil(j) : s.start[j];
      at = (first[0] * g.in[1] + first[1]) * g.in[2] + first[2];
      if (pool_window_inside<W, F>(s.start, g.in)) pool_fixed_taps<W, F, false>(base, s.start, g.in, take);
      else pool_fixed_taps<W, F, true>(base, s.start, g.in, take);
    } else {
      at = (s.lo[0] * g.in[1] + s.lo[1]) * g.in[2] + s.lo[2];
      for (I a = s.lo[0]; a < s.hi[0]; a += s.st[0])
        for (I b = s.lo[1]; b < s.hi[1]; b += s.st[1]) {
          const I row = (a * g.in[1] + b) * g.in[2];
          for (I c = s.lo[2]; c < s.hi[2]; c += s.st[2]) take(row + c, base[row + c]);
        }
    }
    y[idx] = from_float<T>(best);
    indices[idx] = at;
  });
}

}  // namespace tileops

// MaxPool{1,2,3}dIndicesFwdOp and AdaptiveMaxPool2dIndicesFwdOp: max pools that also write each
// output's int64 index within its input plane (the spatial dims flattened row-major), as torch's
// return_indices=True. One thread an output, grid-stride; index math in I (int where the plan saw
// every index and product below 2^31, pool_index_bits, else long long); the window from the call's
// PoolGeometry by pool_fwd.cuh's rules. Taps are scanned in row-major order and a larger
// value or a NaN takes over (torch's `val > max || isnan(val)`): of equal maxima the first is kept,
// of NaNs the last; the index starts at the window's first tap.
#pragma once
#include "pool/pool_fwd.cuh"

namespace tileops {

constexpr int kPoolIndicesThreads = 256;

template <typename T, typename I, bool ADAPTIVE>
__global__ void __launch_bounds__(kPoolIndicesThreads)
pool_max_indices_fwd(const T* __restrict__ x, T* __restrict__ y, long long* __restrict__ indices, long long outputs,
                     PoolGeometry geometry) {
  const PoolDims<I> g = pool_dims<I, PoolWindowOfCall>(geometry);
  const I plane_in = g.in[0] * g.in[1] * g.in[2];
  const I plane_out = g.out[0] * g.out[1] * g.out[2];
  const I step = static_cast<I>(gridDim.x) * kPoolIndicesThreads;
  for (I o = static_cast<I>(blockIdx.x) * kPoolIndicesThreads + threadIdx.x; o < outputs; o += step) {
    const I plane = o / plane_out;
    I rest = o - plane * plane_out;
    I lo[3], hi[3], st[3];
#pragma unroll
    for (int j = 2; j >= 0; --j) {
      const I q = rest / g.out[j];
      const I oj = rest - q * g.out[j];
      rest = q;
      if (ADAPTIVE) {  // [floor(o * in / out), ceil((o + 1) * in / out))
        lo[j] = oj * g.in[j] / g.out[j];
        hi[j] = ((oj + 1) * g.in[j] + g.out[j] - 1) / g.out[j];
        st[j] = 1;
      } else {  // start + i * dil for i < kernel, from the first tap at or past 0, below in
        const I start = oj * g.stride[j] - g.pad[j];
        lo[j] = start < 0 ? start + (-start + g.dil[j] - 1) / g.dil[j] * g.dil[j] : start;
        hi[j] = pool_min(start + (g.kernel[j] - 1) * g.dil[j] + 1, g.in[j]);
        st[j] = g.dil[j];
      }
    }
    const T* base = x + static_cast<long long>(plane) * plane_in;
    float best = -__int_as_float(0x7f800000);
    I at = (lo[0] * g.in[1] + lo[1]) * g.in[2] + lo[2];
    for (I a = lo[0]; a < hi[0]; a += st[0])
      for (I b = lo[1]; b < hi[1]; b += st[1]) {
        const I row = (a * g.in[1] + b) * g.in[2];
        for (I c = lo[2]; c < hi[2]; c += st[2]) {
          const float v = to_float(base[row + c]);
          if (v > best || v != v) {
            best = v;
            at = row + c;
          }
        }
      }
    y[o] = from_float<T>(best);
    indices[o] = at;
  }
}

}  // namespace tileops

// Gated activation over rows of x = [gate | up] (each d wide): y[r, c] = act(gate[r, c]) * up[r, c],
// fp32 math, one rounding (vLLM's act_and_mul layout).
//
// Flat grid-stride over the rows * d / VEC output vectors; VEC-wide accesses need d % VEC == 0 and
// aligned x and y (the host decides). UNROLL output vectors (2 * UNROLL loads) in flight per trip.
// The row of a flat index is one division, 32-bit whenever the vector count fits (the common case).
#pragma once
#include "activation/act.cuh"
#include "common/dtypes.cuh"

namespace tileops {

template <typename T, int ACT, int VEC, int UNROLL>
__global__ void __launch_bounds__(256) gated_fwd(const T* x, T* y, long long rows, long long d) {
  using V = Vec<T, VEC>;
  const long long dv = d / VEC;  // vectors per output row
  const long long total = rows * dv;
  const bool narrow = total <= 0xffffffffLL;
  const V* xv = reinterpret_cast<const V*>(x);
  V* yv = reinterpret_cast<V*>(y);
  const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = tid; i < total; i += stride * UNROLL) {
    V g[UNROLL], u[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) {
      const long long j = i + k * stride;
      if (j < total) {
        const long long r = narrow ? static_cast<long long>(static_cast<unsigned>(j) / static_cast<unsigned>(dv))
                                   : j / dv;
        const long long gi = j + r * dv;  // = r * 2 * dv + (j - r * dv)
        g[k] = xv[gi];
        u[k] = xv[gi + dv];
      }
    }
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) {
      const long long j = i + k * stride;
      if (j < total) {
        V o;
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          o.v[e] = from_float<T>(activate<ACT, sizeof(T) == 2>(to_float(g[k].v[e])) * to_float(u[k].v[e]));
        yv[j] = o;
      }
    }
  }
}

}  // namespace tileops

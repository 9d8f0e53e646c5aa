// Elementwise activation y = act(x) over n contiguous elements, fp32 math, one rounding.
//
// Each thread moves VEC-wide vectors (16 bytes when the host found both pointers 16-byte aligned),
// UNROLL of them in flight per loop trip (all loads, then all stores), grid-stride over the
// n / VEC full vectors; the n % VEC trailing elements go to the grid's first threads.
// x and y may be the same buffer (the _writes_x branch): no __restrict__, and each element is read
// once then written by the same thread, so aliasing is safe.
#pragma once
#include "activation/act.cuh"
#include "common/dtypes.cuh"

namespace tileops {

template <typename T, int ACT, int VEC, int UNROLL>
__global__ void __launch_bounds__(256) unary_fwd(const T* x, T* y, long long n) {
  using V = Vec<T, VEC>;
  const long long nv = n / VEC;
  const V* xv = reinterpret_cast<const V*>(x);
  V* yv = reinterpret_cast<V*>(y);
  const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = tid; i < nv; i += stride * UNROLL) {
    V v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (i + u * stride < nv) v[u] = xv[i + u * stride];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (i + u * stride < nv) {
        V o;
#pragma unroll
        for (int j = 0; j < VEC; ++j) o.v[j] = from_float<T>(activate<ACT>(to_float(v[u].v[j])));
        yv[i + u * stride] = o;
      }
    }
  }
  if constexpr (VEC > 1) {
    const long long t = nv * VEC + tid;  // fewer than VEC trailing elements
    if (t < n) y[t] = from_float<T>(activate<ACT>(to_float(x[t])));
  }
}

}  // namespace tileops

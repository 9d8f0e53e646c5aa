// DropoutFwdOp and DropoutBwdOp (docs/CONTRACT.md §11): y[i] = float32(x[i]) * factor(i) rounded to
// T, where factor(i) is 0 when word i % 4 of Philox4x32-10 at counter i / 4 under the key `seed` is
// below drop_below, else scale (the host's dropout_rule gives both; p = 1 is scale 0).
//
// Layout: thread t owns the ELEMS = max(VEC, 4) elements from t * ELEMS: one Philox call per four
// elements, every word used, moved as ELEMS / VEC accesses of VEC elements; the thread past the
// last whole group handles the tail element by element. x may be y (no __restrict__): each element
// is read before it is written, by the same thread.
// Host side (src/targets/nvrtc/regularization/dropout.cpp) requires x and y aligned to one access.
#pragma once
#include "common/dtypes.cuh"
#include "common/philox.cuh"

namespace tileops {

constexpr int kDropoutThreads = 256;

template <typename T, int VEC>
__global__ void __launch_bounds__(kDropoutThreads)
dropout_fwd(const T* x, T* y, long long n, unsigned long long seed, unsigned drop_below, float scale) {
  static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC: 1, 2, 4 or 8 elements");
  constexpr int kElems = VEC >= 4 ? VEC : 4;
  using V = Vec<T, VEC>;
  const long long first = (static_cast<long long>(blockIdx.x) * kDropoutThreads + threadIdx.x) * kElems;
  if (first >= n) return;
  float factor[kElems];
#pragma unroll
  for (int g = 0; g < kElems / 4; ++g) {
    const Philox4 w = philox_group(seed, static_cast<unsigned long long>(first / 4 + g));
#pragma unroll
    for (int k = 0; k < 4; ++k) factor[4 * g + k] = w.w[k] < drop_below ? 0.f : scale;
  }
  if (first + kElems <= n) {
    const V* xv = reinterpret_cast<const V*>(x + first);
    V* yv = reinterpret_cast<V*>(y + first);
#pragma unroll
    for (int a = 0; a < kElems / VEC; ++a) {
      const V in = xv[a];
      V out;
#pragma unroll
      for (int j = 0; j < VEC; ++j) out.v[j] = from_float<T>(to_float(in.v[j]) * factor[a * VEC + j]);
      yv[a] = out;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kElems; ++j)  // constant indices keep factor[] in registers
      if (first + j < n) y[first + j] = from_float<T>(to_float(x[first + j]) * factor[j]);
  }
}

}  // namespace tileops

// Elementwise activation y = act(x) over n contiguous elements, fp32 math, one rounding.
// TI is x's storage type, TO y's: the same for every op but SigmoidFwdOp on integer/bool x (-> float).
//
// Each thread handles VEC elements a step: loads of IN = min(VEC, 16 / sizeof(TI)) elements and
// stores of OUT = min(VEC, 16 / sizeof(TO)), so with TI == TO a step is one 16-byte load and one
// 16-byte store (when the host found the pointers aligned), and with TI != TO the host sizes VEC by
// y's 16-byte store (int8 -> float: a 4-byte load, one 16-byte store). UNROLL steps are
// in flight per loop trip (all loads, then all stores), grid-stride over the n / VEC full steps; the
// n % VEC trailing elements go to the grid's first threads.
// x and y may be the same buffer (the _writes_x branch, TI == TO): no __restrict__, and each element
// is read once then written by the same thread, so aliasing is safe.
#pragma once
#include "activation/act.cuh"
#include "common/dtypes.cuh"

namespace tileops {

template <typename TI, typename TO, int ACT, int VEC, int UNROLL>
__global__ void __launch_bounds__(256) unary_fwd(const TI* x, TO* y, long long n) {
  constexpr int IN = VEC * sizeof(TI) <= 16 ? VEC : 16 / static_cast<int>(sizeof(TI));
  constexpr int OUT = VEC * sizeof(TO) <= 16 ? VEC : 16 / static_cast<int>(sizeof(TO));
  static_assert(VEC % IN == 0 && VEC % OUT == 0, "VEC is a power of two");
  using VI = Vec<TI, IN>;
  using VO = Vec<TO, OUT>;
  const long long nv = n / VEC;
  const VI* xv = reinterpret_cast<const VI*>(x);
  VO* yv = reinterpret_cast<VO*>(y);
  const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = tid; i < nv; i += stride * UNROLL) {
    VI v[UNROLL][VEC / IN];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (i + u * stride < nv) {
#pragma unroll
        for (int c = 0; c < VEC / IN; ++c) v[u][c] = xv[(i + u * stride) * (VEC / IN) + c];
      }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (i + u * stride < nv) {
#pragma unroll
        for (int c = 0; c < VEC / OUT; ++c) {
          VO o;
#pragma unroll
          for (int j = 0; j < OUT; ++j) {
            const int e = c * OUT + j;  // element of the step
            o.v[j] = from_float<TO>(activate<ACT, sizeof(TO) == 2>(to_float(v[u][e / IN].v[e % IN])));
          }
          yv[(i + u * stride) * (VEC / OUT) + c] = o;
        }
      }
    }
  }
  if constexpr (VEC > 1) {
    const long long t = nv * VEC + tid;  // fewer than VEC trailing elements
    if (t < n) y[t] = from_float<TO>(activate<ACT, sizeof(TO) == 2>(to_float(x[t])));
  }
}

}  // namespace tileops

// Gated activation over rows of x holding a gate and an up value per output element (each d a row):
// y[r, c] = f(gate[r, c], up[r, c]), fp32 math, one rounding.
//
// Layouts (LAYOUT): kGateFirst, x = [gate | up] (vLLM's act_and_mul); kGateSecond, x = [up | gate]
// (vLLM's mul_and_silu); kGateInterleaved, x = [gate0, up0, gate1, up1, ...] (gpt-oss's SwiGLU).
// f is act(gate) * up, or a function of both with run-time scalars a, b (FatReLU's threshold;
// the clamped SwiGLU's alpha and limit).
//
// Flat grid-stride over the rows * d / VEC output vectors; VEC-wide accesses need d % VEC == 0 and
// aligned x and y (the host decides). UNROLL output vectors (2 * UNROLL loads) in flight per trip.
// The row of a flat index is one division, 32-bit whenever the vector count fits (the common case);
// the interleaved layout needs none (output element i reads x[2i], x[2i + 1]).
#pragma once
#include "activation/act.cuh"
#include "common/dtypes.cuh"

namespace tileops {

// f of one (gate, up) pair of x's storage type T, in fp32.
template <int ACT, bool FAST, typename T>
__device__ __forceinline__ float gated(T gate, T up, float a, float b) {
  if constexpr (ACT == kActFatRelu) {
    const float g = to_float(gate);
    return (g <= a ? 0.f : g) * to_float(up);  // a = threshold; a NaN gate stays NaN, as F.threshold
  } else if constexpr (ACT == kActSwigluOai) {
    // a = alpha, b = limit; the comparisons keep a NaN (as torch.clamp; fminf would not).
    const float g = to_float(gate), u = to_float(up);
    const float gc = g > b ? b : g;
    const float uc = u > b ? b : (u < -b ? -b : u);
    return (uc + 1.f) * (gc * activate<kActSigmoid, FAST>(a * gc));
  } else {
    return activate<ACT, FAST>(to_float(gate)) * to_float(up);
  }
}

namespace gated_detail {
template <typename T, int ACT, int LAYOUT, int VEC, int UNROLL>
__device__ __forceinline__ void run(const T* x, T* y, long long rows, long long d, float a, float b) {
  using V = Vec<T, VEC>;
  const long long dv = d / VEC;  // vectors per output row
  const long long total = rows * dv;
  const bool narrow = total <= 0xffffffffLL;
  const V* xv = reinterpret_cast<const V*>(x);
  V* yv = reinterpret_cast<V*>(y);
  const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = tid; i < total; i += stride * UNROLL) {
    V g[UNROLL], u[UNROLL];  // interleaved: the two vectors holding VEC (gate, up) pairs
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) {
      const long long j = i + k * stride;
      if (j < total) {
        if constexpr (LAYOUT == kGateInterleaved) {
          g[k] = xv[2 * j];
          u[k] = xv[2 * j + 1];
        } else {
          const long long r = narrow ? static_cast<long long>(static_cast<unsigned>(j) / static_cast<unsigned>(dv))
                                     : j / dv;
          const long long gi = j + r * dv;  // = r * 2 * dv + (j - r * dv)
          g[k] = xv[LAYOUT == kGateFirst ? gi : gi + dv];
          u[k] = xv[LAYOUT == kGateFirst ? gi + dv : gi];
        }
      }
    }
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) {
      const long long j = i + k * stride;
      if (j < total) {
        V o;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          if constexpr (LAYOUT == kGateInterleaved) {  // pair e: elements 2e, 2e + 1 of g[k] then u[k]
            o.v[e] = from_float<T>(gated<ACT, sizeof(T) == 2>((2 * e < VEC ? g[k] : u[k]).v[(2 * e) % VEC],
                                                              (2 * e + 1 < VEC ? g[k] : u[k]).v[(2 * e + 1) % VEC],
                                                              a, b));
          } else {
            o.v[e] = from_float<T>(gated<ACT, sizeof(T) == 2>(g[k].v[e], u[k].v[e], a, b));
          }
        }
        yv[j] = o;
      }
    }
  }
}
}  // namespace gated_detail

// [gate | up], y = act(gate) * up: SiluAndMul, GeluAndMul, GeluTanhAndMul.
template <typename T, int ACT, int VEC, int UNROLL>
__global__ void __launch_bounds__(256) gated_fwd(const T* x, T* y, long long rows, long long d) {
  gated_detail::run<T, ACT, kGateFirst, VEC, UNROLL>(x, y, rows, d, 0.f, 0.f);
}

// Any layout and the run-time scalars: MulAndSilu, FatreluAndMul, SwigluOAIAndMul.
template <typename T, int ACT, int LAYOUT, int VEC, int UNROLL>
__global__ void __launch_bounds__(256) gated_layout_fwd(const T* x, T* y, long long rows, long long d, float a,
                                                        float b) {
  gated_detail::run<T, ACT, LAYOUT, VEC, UNROLL>(x, y, rows, d, a, b);
}

}  // namespace tileops

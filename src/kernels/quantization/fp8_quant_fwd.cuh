// FP8QuantFwdOp: per-row float8_e4m3fn quantisation. For each row of n elements of x (T: f16, bf16,
// float):
//   amax  = max(absmax(row), 1e-4)      (float32; a NaN in the row makes it NaN)
//   scale = amax * (1 / 448)            (the float32 product, stored to scales[row])
//   q     = e4m3fn(clamp(x / scale, -448, 448)), a true float32 division, rounded to nearest even
//
// Layout: a CTA of kFp8QuantThreads threads holds kFp8QuantThreads / TPR rows, TPR threads a row (a
// power of two, at most a warp: the row's absmax is a shuffle reduction). Thread t of a row owns the
// VEC-wide accesses t, t + TPR, ... of it. With PER_THREAD > 0 the row stays in registers between
// the absmax and the quantised store (one read of x); PER_THREAD == 0 reads the row twice (rows too
// long for registers; the second read mostly hits L1/L2).
// Host side (src/targets/nvrtc/quantization/fp8_quant.cpp) picks the template arguments and
// requires n % VEC == 0 and x, q aligned to one access (VEC * sizeof(T) and VEC bytes).
#pragma once
#include "common/dtypes.cuh"
#include "common/fp8.cuh"

namespace tileops {

constexpr int kFp8QuantThreads = 256;

// The absmax is taken on the bit patterns of |v|: for non-negative floats their unsigned order is
// the float order, and every NaN sorts above +inf, so the maximum is exact and keeps a NaN (fmaxf
// would drop it).
template <typename T, int VEC>
__device__ __forceinline__ unsigned fp8_quant_abs_bits(const Vec<T, VEC>& v, unsigned m) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) m = max(m, __float_as_uint(to_float(v.v[j])) & 0x7fffffffu);
  return m;
}

// scale = max(amax, 1e-4) * (1 / 448) in float32; `<` is false for a NaN amax, which stays NaN.
__device__ __forceinline__ float fp8_quant_scale(unsigned amax_bits) {
  float a = __uint_as_float(amax_bits);
  if (a < 1e-4f) a = 1e-4f;
  return a * (1.f / 448.f);
}

template <typename T, int VEC>
__device__ __forceinline__ Vec<fp8_e4m3, VEC> fp8_quant_vec(const Vec<T, VEC>& v, float scale) {
  Vec<fp8_e4m3, VEC> out;
#pragma unroll
  for (int j = 0; j < VEC; ++j) out.v[j] = fp8_e4m3{to_e4m3_sat(to_float(v.v[j]) / scale)};
  return out;
}

template <typename T, int VEC, int TPR, int PER_THREAD>
__global__ void __launch_bounds__(kFp8QuantThreads)
fp8_quant_fwd(const T* __restrict__ x, float* __restrict__ scales, fp8_e4m3* __restrict__ q, long long rows,
              long long vecs) {
  static_assert(TPR >= 1 && TPR <= 32 && (TPR & (TPR - 1)) == 0, "TPR: a power of two within a warp");
  using V = Vec<T, VEC>;
  using QV = Vec<fp8_e4m3, VEC>;
  constexpr int kRows = kFp8QuantThreads / TPR;
  const int t = threadIdx.x % TPR;
  const long long row = static_cast<long long>(blockIdx.x) * kRows + threadIdx.x / TPR;
  // Rows past the end still take part in the shuffles (full-warp masks), reading and writing nothing.
  const bool active = row < rows;
  const long long base = (active ? row : 0) * vecs;
  const V* xr = reinterpret_cast<const V*>(x) + base;
  QV* qr = reinterpret_cast<QV*>(q) + base;

  unsigned m = 0u;
  V cache[PER_THREAD > 0 ? PER_THREAD : 1];
  if constexpr (PER_THREAD > 0) {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const long long c = static_cast<long long>(i) * TPR + t;
      if (active && c < vecs) cache[i] = xr[c];
    }
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const long long c = static_cast<long long>(i) * TPR + t;
      if (active && c < vecs) m = fp8_quant_abs_bits(cache[i], m);
    }
  } else {
    for (long long c = t; active && c < vecs; c += TPR) m = fp8_quant_abs_bits(xr[c], m);
  }
#pragma unroll
  for (int offset = TPR / 2; offset > 0; offset /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
  const float scale = fp8_quant_scale(m);
  if (!active) return;
  if (t == 0) scales[row] = scale;
  if constexpr (PER_THREAD > 0) {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const long long c = static_cast<long long>(i) * TPR + t;
      if (c < vecs) qr[c] = fp8_quant_vec(cache[i], scale);
    }
  } else {
    for (long long c = t; c < vecs; c += TPR) qr[c] = fp8_quant_vec(xr[c], scale);
  }
}

}  // namespace tileops

// LayerNorm forward: y = (x - mean) * rsqrt(var + eps) * w + b over each row of N, in float32,
// rounded once to T (torch.nn.functional.layer_norm's semantics; biased variance). The weight and the
// bias are W: T, or float32 beside a 16-bit row (register and streaming rows).
// Same layout as rms_norm_fwd.cuh (ROWS rows of TPR threads, VEC-wide accesses). With CACHE the row
// stays in registers and mean/variance are two exact passes over them; without it (very long rows)
// the row is read three times (mean, variance, output), the re-reads mostly from L2.
// Merging per-thread (count, mean, M2) summaries in one reduction instead of the two below was
// slower (docs/PERF.md), so the exact two-pass form stays; what held
// LayerNorm back was when its loads were issued (below).
#pragma once
#include "common/dtypes.cuh"
#include "common/reduce.cuh"
#include "norm/norm_weight.cuh"

namespace tileops {

template <typename T, int VEC>
__device__ __forceinline__ float affine_at(const Vec<T, VEC>& v, int j) { return to_float(v.v[j]); }
template <typename W, int VEC>
__device__ __forceinline__ float affine_at(const WeightVec<W, VEC>& v, int j) { return v.template factor<false>(j); }

// One output vector: (x - mean) * rstd, times the weight, plus the bias (each when present), rounded
// once to T. Shared by the register-resident and the staged LayerNorm kernels (AV: a Vec of T, or a
// WeightVec of float32 weights).
template <bool HAS_WEIGHT, bool HAS_BIAS, typename T, int VEC, typename AV>
__device__ __forceinline__ Vec<T, VEC> layer_norm_affine(const Vec<T, VEC>& v, const AV& wv, const AV& bv,
                                                         float mean, float rstd) {
  Vec<T, VEC> out;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    float f = (to_float(v.v[j]) - mean) * rstd;
    if constexpr (HAS_WEIGHT) f *= affine_at(wv, j);
    if constexpr (HAS_BIAS) f += affine_at(bv, j);
    out.v[j] = from_float<T>(f);
  }
  return out;
}

template <typename T, int N, int VEC, int TPR, int ROWS, bool HAS_WEIGHT, bool HAS_BIAS, bool CACHE, typename W = T>
__global__ void __launch_bounds__(TPR * ROWS)
layer_norm_fwd(const T* __restrict__ x, const W* __restrict__ w, const W* __restrict__ b, T* __restrict__ y,
               long long rows, float eps) {
  using V = Vec<T, VEC>;
  using WV = WeightVec<W, VEC>;  // for W == T one access of VEC elements, as x's
  constexpr int kVecs = N / VEC;
  constexpr int kPerThread = (kVecs + TPR - 1) / TPR;
  constexpr bool kExact = kVecs % TPR == 0;
  // Weight and bias vectors are loaded with x when registers allow (as RMSNorm's weight), so the
  // output pass does not wait for another round trip to L2 after the two reductions.
  constexpr bool kPrefetch = (HAS_WEIGHT || HAS_BIAS) && CACHE && kPerThread * VEC * sizeof(W) <= 64;
  __shared__ float scratch[TPR > 32 ? TPR / 32 : 1];

  const int t = threadIdx.x % TPR;
  const long long row = static_cast<long long>(blockIdx.x) * ROWS + threadIdx.x / TPR;
  const bool active = row < rows;  // inactive threads still join the shuffles
  const V* xr = reinterpret_cast<const V*>(x + (active ? row : 0) * N);
  V* yr = reinterpret_cast<V*>(y + (active ? row : 0) * N);

  auto emit = [&](int c, const V& v, const WV& wv, const WV& bv, float mean, float rstd) {
    yr[c] = layer_norm_affine<HAS_WEIGHT, HAS_BIAS>(v, wv, bv, mean, rstd);
  };
  auto load_w = [&](int c) {
    WV v;
    if constexpr (HAS_WEIGHT) v.load(w, c);
    return v;
  };
  auto load_b = [&](int c) {
    WV v;
    if constexpr (HAS_BIAS) v.load(b, c);
    return v;
  };

  float sum = 0.f;
  if constexpr (CACHE) {
    V cache[kPerThread];
    WV wcache[kPrefetch && HAS_WEIGHT ? kPerThread : 1];
    WV bcache[kPrefetch && HAS_BIAS ? kPerThread : 1];
    // Every load is issued before the first use: one loop that summed each vector as it arrived
    // stalled on each load in turn (docs/PERF.md).
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = i * TPR + t;
      if (active && (kExact || c < kVecs)) {
        cache[i] = xr[c];
        if constexpr (kPrefetch && HAS_WEIGHT) wcache[i].load(w, c);
        if constexpr (kPrefetch && HAS_BIAS) bcache[i].load(b, c);
      }
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = i * TPR + t;
      if (active && (kExact || c < kVecs)) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) sum += to_float(cache[i].v[j]);
      }
    }
    const float mean = group_sum<TPR>(sum, scratch) / N;
    if constexpr (TPR > 32) __syncthreads();  // scratch is reused by the second reduction
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = i * TPR + t;
      if (active && (kExact || c < kVecs)) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) { const float d = to_float(cache[i].v[j]) - mean; sq += d * d; }
      }
    }
    const float rstd = rsqrtf(group_sum<TPR>(sq, scratch) / N + eps);
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = i * TPR + t;
      if (active && (kExact || c < kVecs)) {
        if constexpr (kPrefetch) {
          emit(c, cache[i], wcache[HAS_WEIGHT ? i : 0], bcache[HAS_BIAS ? i : 0], mean, rstd);
        } else {
          emit(c, cache[i], load_w(c), load_b(c), mean, rstd);
        }
      }
    }
  } else {
    for (int c = t; active && c < kVecs; c += TPR) {
      const V v = xr[c];
#pragma unroll
      for (int j = 0; j < VEC; ++j) sum += to_float(v.v[j]);
    }
    const float mean = group_sum<TPR>(sum, scratch) / N;
    if constexpr (TPR > 32) __syncthreads();
    float sq = 0.f;
    for (int c = t; active && c < kVecs; c += TPR) {
      const V v = xr[c];
#pragma unroll
      for (int j = 0; j < VEC; ++j) { const float d = to_float(v.v[j]) - mean; sq += d * d; }
    }
    const float rstd = rsqrtf(group_sum<TPR>(sq, scratch) / N + eps);
    for (int c = t; active && c < kVecs; c += TPR) emit(c, xr[c], load_w(c), load_b(c), mean, rstd);
  }
}

}  // namespace tileops

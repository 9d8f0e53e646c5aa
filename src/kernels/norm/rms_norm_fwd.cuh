// RMSNorm forward, register-resident rows: y = x * rsqrt(mean(x^2) + eps) * w, in float32, rounded
// once to T (torch.nn.functional.rms_norm's semantics). With ADD_RESIDUAL (FusedAddRMSNormFwdOp) the
// normalised row is s = T(x + residual), which is also stored to residual_out (which may be the
// residual input itself: the in-place branch), exactly as `residual = x + residual` in T would.
//
// Layout: a CTA holds ROWS rows, TPR threads per row; thread t of a row owns the VEC-wide vectors
// t, t + TPR, t + 2*TPR, ... of that row. With CACHE the row stays in registers between the
// sum-of-squares pass and the scale pass (one HBM read); without it the second pass reads again
// (rows too long for registers; the re-read mostly hits L2).
// The weight is W (T, or float32 beside a 16-bit row); with GEMMA the row is scaled by 1 + w
// (GemmaRMSNormFwdOp, GemmaFusedAddRMSNormFwdOp), formed in float32 as vLLM and flashinfer do.
// Host side (src/targets/nvrtc/norm/row_norm_plan.cpp) picks the template arguments; requires
// N % VEC == 0 and 16-byte-aligned pointers when VEC * sizeof(T) == 16 (or VEC * sizeof(W) >= 16).
#pragma once
#include "common/dtypes.cuh"
#include "common/reduce.cuh"
#include "norm/norm_weight.cuh"

namespace tileops {

// The row element source: x, or T(x + residual) written back to residual_out. residual_in and
// residual_out may alias (in place), so neither is __restrict__; each element is read, then written,
// by the same thread.
// One output vector: v * r, times the weight when present, rounded once to T. Used by the
// cluster and staged RMSNorm kernels.
template <bool HAS_WEIGHT, typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> rms_norm_scale(const Vec<T, VEC>& v, const Vec<T, VEC>& wv, float r) {
  Vec<T, VEC> out;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    float f = to_float(v.v[j]) * r;
    if constexpr (HAS_WEIGHT) f *= to_float(wv.v[j]);
    out.v[j] = from_float<T>(f);
  }
  return out;
}

template <typename T, int VEC, bool ADD_RESIDUAL>
struct RowSource {
  using V = Vec<T, VEC>;
  const V* x;
  const V* residual_in;
  V* residual_out;

  // One element vector in two steps, so that a thread issues all its loads before any store:
  // residual_in and residual_out may alias, so the compiler may not move a later load above an
  // earlier store, and a load-add-store loop would wait for each load in turn.
  struct Raw {
    V x, r;
  };
  __device__ __forceinline__ Raw load(int c) const {
    Raw raw;
    raw.x = x[c];
    if constexpr (ADD_RESIDUAL) raw.r = residual_in[c];
    return raw;
  }
  // The row element: x, or T(x + residual) stored to residual_out.
  __device__ __forceinline__ V settle(int c, const Raw& raw) const {
    if constexpr (!ADD_RESIDUAL) return raw.x;
    V v;
#pragma unroll
    for (int j = 0; j < VEC; ++j) v.v[j] = from_float<T>(to_float(raw.x.v[j]) + to_float(raw.r.v[j]));
    residual_out[c] = v;
    return v;
  }
  __device__ __forceinline__ V first_read(int c) const { return settle(c, load(c)); }
  // Second read (rows not kept in registers): the sum was already stored to residual_out.
  __device__ __forceinline__ V again(int c) const {
    if constexpr (ADD_RESIDUAL) return residual_out[c];
    return x[c];
  }
};

template <typename T, int N, int VEC, int TPR, int ROWS, bool HAS_WEIGHT, bool CACHE, bool ADD_RESIDUAL, typename W,
          bool GEMMA>
__device__ __forceinline__ void rms_norm_row(const RowSource<T, VEC, ADD_RESIDUAL>& src, const W* __restrict__ w,
                                             T* __restrict__ y, bool active, float* scratch, float eps) {
  using V = Vec<T, VEC>;
  using WV = WeightVec<W, VEC>;
  constexpr int kVecs = N / VEC;                      // vectors per row
  constexpr int kPerThread = (kVecs + TPR - 1) / TPR; // vectors per thread
  constexpr bool kExact = kVecs % TPR == 0;
  const int t = threadIdx.x % TPR;
  V* yr = reinterpret_cast<V*>(y);

  float ss = 0.f;
  if constexpr (CACHE) {
    // Weight vectors are loaded with x when registers allow, so the scale pass does not wait for a
    // second round trip to memory after the reduction (what bounds short rows, e.g. decode).
    constexpr bool kPrefetchW = HAS_WEIGHT && kPerThread * VEC * sizeof(W) <= 64;
    V cache[kPerThread];
    WV wcache[kPrefetchW ? kPerThread : 1];
    typename RowSource<T, VEC, ADD_RESIDUAL>::Raw raw[kPerThread];
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = i * TPR + t;
      if (active && (kExact || c < kVecs)) {
        raw[i] = src.load(c);
        if constexpr (kPrefetchW) wcache[i].load(w, c);
      }
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = i * TPR + t;
      if (active && (kExact || c < kVecs)) {
        cache[i] = src.settle(c, raw[i]);
#pragma unroll
        for (int j = 0; j < VEC; ++j) { const float f = to_float(cache[i].v[j]); ss += f * f; }
      }
    }
    const float r = rsqrtf(group_sum<TPR>(ss, scratch) / N + eps);
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = i * TPR + t;
      if (active && (kExact || c < kVecs)) {
        // Written out rather than through rms_norm_scale: the helper reorders this kernel's SASS
        // (QK-norm's and decode's rows), which was measured as it is.
        V out;
        WV wv;
        if constexpr (kPrefetchW) wv = wcache[i];
        else if constexpr (HAS_WEIGHT) wv.load(w, c);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          float f = to_float(cache[i].v[j]) * r;
          if constexpr (HAS_WEIGHT) f *= wv.template factor<GEMMA>(j);
          out.v[j] = from_float<T>(f);
        }
        yr[c] = out;
      }
    }
  } else {
#pragma unroll 4
    for (int c = t; c < kVecs; c += TPR) {
      if (!active) break;
      const V v = src.first_read(c);
#pragma unroll
      for (int j = 0; j < VEC; ++j) { const float f = to_float(v.v[j]); ss += f * f; }
    }
    const float r = rsqrtf(group_sum<TPR>(ss, scratch) / N + eps);
    // Walk back from the end: the tail of the row was read last and is the likeliest to be in L2.
#pragma unroll 4
    for (int c = kVecs - 1 - ((kVecs - 1 - t) % TPR + TPR) % TPR; c >= 0; c -= TPR) {
      if (!active) break;
      const V v = src.again(c);
      WV wv;
      if constexpr (HAS_WEIGHT) wv.load(w, c);
      V out;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        float f = to_float(v.v[j]) * r;
        if constexpr (HAS_WEIGHT) f *= wv.template factor<GEMMA>(j);
        out.v[j] = from_float<T>(f);
      }
      yr[c] = out;
    }
  }
}

template <typename T, int N, int VEC, int TPR, int ROWS, bool HAS_WEIGHT, bool CACHE, typename W = T, bool GEMMA = false>
__global__ void __launch_bounds__(TPR * ROWS)
rms_norm_fwd(const T* __restrict__ x, const W* __restrict__ w, T* __restrict__ y, long long rows, float eps) {
  using V = Vec<T, VEC>;
  __shared__ float scratch[TPR > 32 ? TPR / 32 : 1];
  const long long row = static_cast<long long>(blockIdx.x) * ROWS + threadIdx.x / TPR;
  // Inactive threads still take part in the shuffles (full-warp masks), they just load nothing.
  const bool active = row < rows;
  const long long off = (active ? row : 0) * N;
  const RowSource<T, VEC, false> src{reinterpret_cast<const V*>(x + off), nullptr, nullptr};
  rms_norm_row<T, N, VEC, TPR, ROWS, HAS_WEIGHT, CACHE, false, W, GEMMA>(src, w, y + off, active, scratch, eps);
}

template <typename T, int N, int VEC, int TPR, int ROWS, bool HAS_WEIGHT, bool CACHE, typename W = T, bool GEMMA = false>
__global__ void __launch_bounds__(TPR * ROWS)
fused_add_rms_norm_fwd(const T* __restrict__ x, const T* residual_in, T* residual_out, const W* __restrict__ w,
                       T* __restrict__ y, long long rows, float eps) {
  using V = Vec<T, VEC>;
  __shared__ float scratch[TPR > 32 ? TPR / 32 : 1];
  const long long row = static_cast<long long>(blockIdx.x) * ROWS + threadIdx.x / TPR;
  const bool active = row < rows;
  const long long off = (active ? row : 0) * N;
  const RowSource<T, VEC, true> src{reinterpret_cast<const V*>(x + off), reinterpret_cast<const V*>(residual_in + off),
                                    reinterpret_cast<V*>(residual_out + off)};
  rms_norm_row<T, N, VEC, TPR, ROWS, HAS_WEIGHT, CACHE, true, W, GEMMA>(src, w, y + off, active, scratch, eps);
}

}  // namespace tileops

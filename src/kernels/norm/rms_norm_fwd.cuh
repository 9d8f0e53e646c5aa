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
// With QUANT (rms_norm_quant_fwd, fused_add_rms_norm_quant_fwd; register rows only) the output is
// quantised to int8 or float8_e4m3fn against a static or a per-row dynamic scale (quant_epilogue).
// Host side (src/targets/nvrtc/norm/row_norm_plan.cpp) picks the template arguments; requires
// N % VEC == 0 and 16-byte-aligned pointers when VEC * sizeof(T) == 16 (or VEC * sizeof(W) >= 16).
#pragma once
#include "common/dtypes.cuh"
#include "common/fp8.cuh"
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

// The quantised output of a register row (RMSNorm*QuantFwdOp): q = quant(y * (1 / scale)), y rounded
// to T after s * r and after the weight product (vLLM's rounding). Static: scale is the given
// per-tensor scale. Dynamic: bound is scale_ub or nullptr, and the row's scale,
// max(min(absmax(y), ub) / qmax, min_scale), is stored to *row_scale.
struct NoQuant {
  static constexpr bool kOn = false;
};
// Per output type: the conversion of v = y / scale, the largest magnitude and vLLM's floor on a
// dynamic scale.
template <typename Q>
struct QuantType;
template <>
struct QuantType<signed char> {  // int8: round to nearest even (cvt.rni), saturate
  static constexpr float kQmax = 127.f;
  static constexpr float kMinScale = 1.1920928955078125e-7f;  // float32's epsilon
  __device__ __forceinline__ static signed char from(float v) {
    return static_cast<signed char>(max(-128, min(127, __float2int_rn(v))));
  }
};
template <>
struct QuantType<fp8_e4m3> {  // float8_e4m3fn: clamp to +-448, round to nearest even
  static constexpr float kQmax = 448.f;
  static constexpr float kMinScale = 1.f / (448.f * 512.f);
  __device__ __forceinline__ static fp8_e4m3 from(float v) { return fp8_e4m3{to_e4m3(fmaxf(-448.f, fminf(v, 448.f)))}; }
};
template <typename Q, bool DYNAMIC>
struct QuantOut {
  static constexpr bool kOn = true;
  Q* q;                // the row's output
  const float* scale;  // static: the scale; dynamic: scale_ub or nullptr
  float* row_scale;    // dynamic: the row's scale
};

// The quantised store of a register row: y = T(T(s * r) * w) replaces the cached row, then (dynamic)
// the row's absmax sets its scale, then q = quant(y * (1 / scale)).
template <typename T, int VEC, int TPR, int VECS, int PER_THREAD, bool PREFETCH_W, typename W, bool GEMMA,
          typename Q, bool DYNAMIC>
__device__ __forceinline__ void quant_epilogue(Vec<T, VEC>* cache, const WeightVec<W, VEC>* wcache,
                                               const W* __restrict__ w, int t, bool active,
                                               const QuantOut<Q, DYNAMIC>& quant, float r) {
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < PER_THREAD; ++i) {
    const int c = i * TPR + t;
    if (active && c < VECS) {
      WeightVec<W, VEC> wv;
      if constexpr (PREFETCH_W) wv = wcache[i];
      else wv.load(w, c);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float xr = to_float(from_float<T>(to_float(cache[i].v[j]) * r));
        cache[i].v[j] = from_float<T>(xr * wv.template factor<GEMMA>(j));
        if constexpr (DYNAMIC) amax = fmaxf(amax, fabsf(to_float(cache[i].v[j])));
      }
    }
  }
  float scale;
  if constexpr (DYNAMIC) {
    __shared__ float max_scratch[TPR > 32 ? TPR / 32 : 1];
    amax = group_reduce<TPR>(amax, max_scratch, [](float a, float b) { return fmaxf(a, b); });
    if (quant.scale != nullptr) amax = fminf(amax, *quant.scale);
    scale = fmaxf(amax / QuantType<Q>::kQmax, QuantType<Q>::kMinScale);
    if (active && t == 0) *quant.row_scale = scale;
  } else {
    scale = *quant.scale;
  }
  const float inv = 1.f / scale;
  Vec<Q, VEC>* qr = reinterpret_cast<Vec<Q, VEC>*>(quant.q);
#pragma unroll
  for (int i = 0; i < PER_THREAD; ++i) {
    const int c = i * TPR + t;
    if (active && c < VECS) {
      Vec<Q, VEC> out;
#pragma unroll
      for (int j = 0; j < VEC; ++j) out.v[j] = QuantType<Q>::from(to_float(cache[i].v[j]) * inv);
      qr[c] = out;
    }
  }
}

template <typename T, int N, int VEC, int TPR, int ROWS, bool HAS_WEIGHT, bool CACHE, bool ADD_RESIDUAL, typename W,
          bool GEMMA, typename QUANT = NoQuant>
__device__ __forceinline__ void rms_norm_row(const RowSource<T, VEC, ADD_RESIDUAL>& src, const W* __restrict__ w,
                                             T* __restrict__ y, bool active, float* scratch, float eps,
                                             const QUANT& quant = QUANT{}) {
  static_assert(CACHE || !QUANT::kOn, "the quantised output is written from registers");
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
    if constexpr (QUANT::kOn) {
      quant_epilogue<T, VEC, TPR, kVecs, kPerThread, kPrefetchW, W, GEMMA>(cache, wcache, w, t, active, quant, r);
      return;
    }
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

// RMSNormStaticQuantFwdOp / RMSNormDynamicQuantFwdOp (register rows): q of type Q (signed char or
// fp8_e4m3); scale is the static scale or scale_ub (nullptr: none); scales (dynamic) one a row.
template <typename T, int N, int VEC, int TPR, int ROWS, typename Q, bool DYNAMIC>
__global__ void __launch_bounds__(TPR * ROWS)
rms_norm_quant_fwd(const T* __restrict__ x, const T* __restrict__ w, Q* __restrict__ q, const float* __restrict__ scale,
                   float* __restrict__ scales, long long rows, float eps) {
  using V = Vec<T, VEC>;
  __shared__ float scratch[TPR > 32 ? TPR / 32 : 1];
  const long long row = static_cast<long long>(blockIdx.x) * ROWS + threadIdx.x / TPR;
  const bool active = row < rows;
  const long long r = active ? row : 0;
  const RowSource<T, VEC, false> src{reinterpret_cast<const V*>(x + r * N), nullptr, nullptr};
  const QuantOut<Q, DYNAMIC> out{q + r * N, scale, DYNAMIC ? scales + r : nullptr};
  rms_norm_row<T, N, VEC, TPR, ROWS, true, true, false, T, false>(src, w, nullptr, active, scratch, eps, out);
}

// FusedAddRMSNormStaticQuantFwdOp / FusedAddRMSNormDynamicQuantFwdOp: as rms_norm_quant_fwd on
// s = T(x + residual), which is stored to residual_out (may alias residual_in).
template <typename T, int N, int VEC, int TPR, int ROWS, typename Q, bool DYNAMIC>
__global__ void __launch_bounds__(TPR * ROWS)
fused_add_rms_norm_quant_fwd(const T* __restrict__ x, const T* residual_in, T* residual_out, const T* __restrict__ w,
                             Q* __restrict__ q, const float* __restrict__ scale, float* __restrict__ scales,
                             long long rows, float eps) {
  using V = Vec<T, VEC>;
  __shared__ float scratch[TPR > 32 ? TPR / 32 : 1];
  const long long row = static_cast<long long>(blockIdx.x) * ROWS + threadIdx.x / TPR;
  const bool active = row < rows;
  const long long r = active ? row : 0;
  const RowSource<T, VEC, true> src{reinterpret_cast<const V*>(x + r * N), reinterpret_cast<const V*>(residual_in + r * N),
                                    reinterpret_cast<V*>(residual_out + r * N)};
  const QuantOut<Q, DYNAMIC> out{q + r * N, scale, DYNAMIC ? scales + r : nullptr};
  rms_norm_row<T, N, VEC, TPR, ROWS, true, true, true, T, false>(src, w, nullptr, active, scratch, eps, out);
}

}  // namespace tileops

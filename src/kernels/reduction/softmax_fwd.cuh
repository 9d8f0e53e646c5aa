// Softmax / log-softmax forward over the last dim of a contiguous [rows, N] tensor, in float32,
// rounded once to T (torch.softmax / torch.log_softmax with dtype=None):
//   softmax:     y = exp(x - m) / s          m = max(x), s = sum(exp(x - m))
//   log_softmax: y = (x - m) - log(s)
// A row of -inf only has m = -inf, so x - m is NaN and the row becomes NaN, as in torch; a +inf
// makes the row NaN too (exp(inf - inf)), as in torch.
//
// Three kernels; the host side (src/targets/nvrtc/reduction/softmax_plan.cpp) picks one and the
// template arguments, and requires N % VEC == 0 and VEC*sizeof(T)-aligned pointers.
//  - softmax_fwd: TPR threads per row, ROWS rows per CTA, thread t owns vectors t, t + TPR, ...
//    CACHE: the row stays in registers (one read); max, then sum of exp, then write.
//    Otherwise an online (max, sum) pass, then a second read (mostly L2) that writes.
//  - softmax_split_stats + softmax_split_apply: long rows with few rows (lm-head logits): SPLITS
//    CTAs per row each reduce a chunk to a partial (max, sum) in `ws`; the second launch combines
//    the SPLITS partials of its row and writes its chunk (re-read from L2).
#pragma once
#include "common/dtypes.cuh"
#include "common/fast_math.cuh"
#include "common/reduce.cuh"

namespace tileops {
namespace softmax_detail {

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// max that propagates NaN (fmaxf drops it): a row holding a NaN is NaN everywhere, as in torch. A
// select, not fast_math.cuh's max.NaN, which made these row kernels slower (docs/PERF.md, Softmax).
__device__ __forceinline__ float max_nan(float a, float b) { return (a != a || a > b) ? a : b; }

// Max across the TPR threads of a row (same layout rules as group_sum in common/reduce.cuh).
template <int TPR>
__device__ __forceinline__ float group_max(float v, float* scratch) {
#pragma unroll
  for (int offset = (TPR < 32 ? TPR : 32) / 2; offset > 0; offset /= 2)
    v = max_nan(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if constexpr (TPR > 32) {
    constexpr int kWarps = TPR / 32;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < kWarps ? scratch[lane] : neg_inf();
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v = max_nan(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Adds one vector to a running (m, s). While everything seen is -inf, s stays 0 (no -inf - -inf).
template <typename T, int VEC>
__device__ __forceinline__ void online_add(float& m, float& s, const Vec<T, VEC>& v) {
  float f[VEC];
  float vm = neg_inf();
#pragma unroll
  for (int j = 0; j < VEC; ++j) { f[j] = to_float(v.v[j]); vm = max_nan(vm, f[j]); }
  const float nm = max_nan(m, vm);
  if (nm == neg_inf()) return;
  float acc = s * fast_exp(m - nm);  // m = -inf: 0; m = nm = +inf: NaN (the row is NaN in torch too)
#pragma unroll
  for (int j = 0; j < VEC; ++j) acc += fast_exp(f[j] - nm);
  s = acc;
  m = nm;
}

// s rescaled from its own max m to the row max M (0 for a thread that saw only -inf).
__device__ __forceinline__ float rescale(float m, float s, float M) { return m == neg_inf() ? 0.f : s * fast_exp(m - M); }

// Two partial (max, sum of exp(x - max)) pairs as one; symmetric in its arguments.
struct CombineMaxSum {
  __device__ __forceinline__ float2 operator()(float2 a, float2 b) const {
    const float M = max_nan(a.x, b.x);
    return make_float2(M, rescale(a.x, a.y, M) + rescale(b.x, b.y, M));
  }
};

template <typename T, int VEC, bool LOG>
__device__ __forceinline__ Vec<T, VEC> finish(const Vec<T, VEC>& v, float M, float inv_s, float log_s) {
  Vec<T, VEC> out;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const float d = to_float(v.v[j]) - M;
    out.v[j] = from_float<T>(LOG ? d - log_s : fast_exp(d) * inv_s);
  }
  return out;
}

}  // namespace softmax_detail

template <typename T, int N, int VEC, int TPR, int ROWS, bool CACHE, bool LOG>
__global__ void __launch_bounds__(TPR * ROWS)
softmax_fwd(const T* __restrict__ x, T* __restrict__ y, long long rows) {
  using namespace softmax_detail;
  using V = Vec<T, VEC>;
  constexpr int kVecs = N / VEC;
  constexpr int kPerThread = (kVecs + TPR - 1) / TPR;
  constexpr bool kExact = kVecs % TPR == 0;
  // Separate scratch per reduction: a second reduction must not overwrite what slow warps still read.
  __shared__ float scratch_max[TPR > 32 ? TPR / 32 : 1];
  __shared__ float scratch_sum[TPR > 32 ? TPR / 32 : 1];
  __shared__ float2 scratch_pair[TPR > 32 ? TPR / 32 : 1];

  const int t = threadIdx.x % TPR;
  const long long row = static_cast<long long>(blockIdx.x) * ROWS + threadIdx.x / TPR;
  // Inactive threads still take part in the shuffles (full-warp masks), they just load nothing.
  const bool active = row < rows;
  const V* xr = reinterpret_cast<const V*>(x + (active ? row : 0) * static_cast<long long>(N));
  V* yr = reinterpret_cast<V*>(y + (active ? row : 0) * static_cast<long long>(N));

  float M, S;
  if constexpr (CACHE) {
    // Each thread reduces its registers to (max, sum of exp(x - max)); one reduction of the pairs
    // then gives the row's (M, S): one barrier instead of two.
    V cache[kPerThread];
    float m = neg_inf();
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = i * TPR + t;
      if (active && (kExact || c < kVecs)) {
        cache[i] = xr[c];
#pragma unroll
        for (int j = 0; j < VEC; ++j) m = max_nan(m, to_float(cache[i].v[j]));
      }
    }
    float s = 0.f;
    if (m != neg_inf()) {  // only -inf seen: adds nothing (and no -inf - -inf)
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const int c = i * TPR + t;
        if (active && (kExact || c < kVecs)) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) s += fast_exp(to_float(cache[i].v[j]) - m);
        }
      }
    }
    const float2 ms = group_reduce<TPR>(make_float2(m, s), scratch_pair, CombineMaxSum{});
    M = ms.x;
    S = ms.y;
    const float inv_s = 1.f / S, log_s = LOG ? logf(S) : 0.f;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = i * TPR + t;
      if (active && (kExact || c < kVecs)) yr[c] = finish<T, VEC, LOG>(cache[i], M, inv_s, log_s);
    }
  } else {
    float m = neg_inf(), s = 0.f;
#pragma unroll 4
    for (int c = t; c < kVecs; c += TPR) {
      if (!active) break;
      online_add<T, VEC>(m, s, xr[c]);
    }
    M = group_max<TPR>(m, scratch_max);
    S = group_sum<TPR>(rescale(m, s, M), scratch_sum);
    const float inv_s = 1.f / S, log_s = LOG ? logf(S) : 0.f;
    // Walk back from the end: the tail of the row was read last and is the likeliest to be in L2.
#pragma unroll 4
    for (int c = kVecs - 1 - ((kVecs - 1 - t) % TPR + TPR) % TPR; c >= 0; c -= TPR) {
      if (!active) break;
      yr[c] = finish<T, VEC, LOG>(xr[c], M, inv_s, log_s);
    }
  }
}

// Vectors [begin, end) of the chunk `part` of a row split in SPLITS chunks.
template <int N, int VEC, int SPLITS>
struct SplitChunk {
  static constexpr int kVecs = N / VEC;
  static constexpr int kChunk = (kVecs + SPLITS - 1) / SPLITS;
  __device__ static int begin(int part) { return part * kChunk; }
  __device__ static int end(int part) { return (part + 1) * kChunk < kVecs ? (part + 1) * kChunk : kVecs; }
};

// Grid: rows * SPLITS CTAs of TPB threads; ws[blockIdx.x] = (max, sum of exp(x - max)) of a chunk.
template <typename T, int N, int VEC, int TPB, int SPLITS>
__global__ void __launch_bounds__(TPB) softmax_split_stats(const T* __restrict__ x, float2* __restrict__ ws) {
  using namespace softmax_detail;
  using V = Vec<T, VEC>;
  using C = SplitChunk<N, VEC, SPLITS>;
  __shared__ float scratch_max[TPB / 32];
  __shared__ float scratch_sum[TPB / 32];
  const long long row = blockIdx.x / SPLITS;
  const int part = blockIdx.x % SPLITS;
  const V* xr = reinterpret_cast<const V*>(x + row * static_cast<long long>(N));
  float m = neg_inf(), s = 0.f;
#pragma unroll 4
  for (int c = C::begin(part) + threadIdx.x; c < C::end(part); c += TPB) online_add<T, VEC>(m, s, xr[c]);
  const float M = group_max<TPB>(m, scratch_max);
  const float S = group_sum<TPB>(rescale(m, s, M), scratch_sum);
  if (threadIdx.x == 0) ws[blockIdx.x] = make_float2(M, S);
}

// Same grid: every thread combines its row's SPLITS partials (a few hundred bytes, L2), then the
// CTA writes its chunk.
template <typename T, int N, int VEC, int TPB, int SPLITS, bool LOG>
__global__ void __launch_bounds__(TPB)
softmax_split_apply(const T* __restrict__ x, const float2* __restrict__ ws, T* __restrict__ y) {
  using namespace softmax_detail;
  using V = Vec<T, VEC>;
  using C = SplitChunk<N, VEC, SPLITS>;
  const long long row = blockIdx.x / SPLITS;
  const int part = blockIdx.x % SPLITS;
  const float2* w = ws + row * SPLITS;
  float M = neg_inf();
#pragma unroll 8
  for (int p = 0; p < SPLITS; ++p) M = max_nan(M, w[p].x);
  float S = 0.f;
#pragma unroll 8
  for (int p = 0; p < SPLITS; ++p) S += rescale(w[p].x, w[p].y, M);
  const float inv_s = 1.f / S, log_s = LOG ? logf(S) : 0.f;
  const V* xr = reinterpret_cast<const V*>(x + row * static_cast<long long>(N));
  V* yr = reinterpret_cast<V*>(y + row * static_cast<long long>(N));
#pragma unroll 4
  for (int c = C::begin(part) + threadIdx.x; c < C::end(part); c += TPB) yr[c] = finish<T, VEC, LOG>(xr[c], M, inv_s, log_s);
}

}  // namespace tileops

// LayerNorm forward: y = (x - mean) * rsqrt(var + eps) * w + b over each row of N, in float32,
// rounded once to T (torch.nn.functional.layer_norm's semantics; biased variance).
// Same layout as rms_norm_fwd.cuh (ROWS rows of TPR threads, VEC-wide accesses). With CACHE the row
// stays in registers, each thread summarises its share as (count, mean, M2) and one reduction merges
// the summaries; without it (very long rows)
// the row is read three times (mean, variance, output), the re-reads mostly from L2.
#pragma once
#include "common/dtypes.cuh"
#include "common/reduce.cuh"

namespace tileops {

struct MeanM2 {
  float count, mean, m2;
};

// Merges two (count, mean, M2) summaries; symmetric in its arguments, so every thread of a row ends
// with the same bits. An empty side contributes nothing.
struct CombineMeanM2 {
  __device__ __forceinline__ MeanM2 operator()(const MeanM2& a, const MeanM2& b) const {
    if (a.count == 0.f) return b;
    if (b.count == 0.f) return a;
    const float n = a.count + b.count;
    const float d = b.mean - a.mean;
    return MeanM2{n, (a.count * a.mean + b.count * b.mean) / n, a.m2 + b.m2 + d * d * (a.count * b.count / n)};
  }
};

template <typename T, int N, int VEC, int TPR, int ROWS, bool HAS_WEIGHT, bool HAS_BIAS, bool CACHE, unsigned EPS_BITS>
__global__ void __launch_bounds__(TPR * ROWS)
layer_norm_fwd(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
               long long rows) {
  using V = Vec<T, VEC>;
  constexpr int kVecs = N / VEC;
  constexpr int kPerThread = (kVecs + TPR - 1) / TPR;
  constexpr bool kExact = kVecs % TPR == 0;
  __shared__ float scratch[TPR > 32 ? TPR / 32 : 1];
  __shared__ MeanM2 scratch_stats[TPR > 32 ? TPR / 32 : 1];

  const int t = threadIdx.x % TPR;
  const long long row = static_cast<long long>(blockIdx.x) * ROWS + threadIdx.x / TPR;
  const bool active = row < rows;  // inactive threads still join the shuffles
  const V* xr = reinterpret_cast<const V*>(x + (active ? row : 0) * N);
  V* yr = reinterpret_cast<V*>(y + (active ? row : 0) * N);
  const V* wr = reinterpret_cast<const V*>(w);
  const V* br = reinterpret_cast<const V*>(b);

  auto emit = [&](int c, const V& v, float mean, float rstd) {
    V out, wv, bv;
    if constexpr (HAS_WEIGHT) wv = wr[c];
    if constexpr (HAS_BIAS) bv = br[c];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      float f = (to_float(v.v[j]) - mean) * rstd;
      if constexpr (HAS_WEIGHT) f *= to_float(wv.v[j]);
      if constexpr (HAS_BIAS) f += to_float(bv.v[j]);
      out.v[j] = from_float<T>(f);
    }
    yr[c] = out;
  };

  float sum = 0.f;
  if constexpr (CACHE) {
    // Each thread takes the exact mean and M2 (sum of squared deviations) of its registers; one
    // reduction merges the (count, mean, M2) triples (Chan et al.), so the row needs one barrier, not
    // two, and no E[x^2] - mean^2 cancellation.
    V cache[kPerThread];
    float cnt = 0.f;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = i * TPR + t;
      if (active && (kExact || c < kVecs)) {
        cache[i] = xr[c];
        cnt += VEC;
#pragma unroll
        for (int j = 0; j < VEC; ++j) sum += to_float(cache[i].v[j]);
      }
    }
    const float local_mean = cnt > 0.f ? sum / cnt : 0.f;
    float m2 = 0.f;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = i * TPR + t;
      if (active && (kExact || c < kVecs)) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) { const float d = to_float(cache[i].v[j]) - local_mean; m2 += d * d; }
      }
    }
    const MeanM2 row = group_reduce<TPR>(MeanM2{cnt, local_mean, m2}, scratch_stats, CombineMeanM2{});
    const float mean = row.mean;
    const float rstd = rsqrtf(row.m2 / N + __uint_as_float(EPS_BITS));
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = i * TPR + t;
      if (active && (kExact || c < kVecs)) emit(c, cache[i], mean, rstd);
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
    const float rstd = rsqrtf(group_sum<TPR>(sq, scratch) / N + __uint_as_float(EPS_BITS));
    for (int c = t; active && c < kVecs; c += TPR) emit(c, xr[c], mean, rstd);
  }
}

}  // namespace tileops

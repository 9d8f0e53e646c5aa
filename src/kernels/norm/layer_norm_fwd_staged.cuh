// LayerNorm forward, staged rows (sm_90+, 16-byte accesses): same semantics as layer_norm_fwd.cuh,
// one row per CTA, brought into shared memory by bulk asynchronous copies (common/bulk_copy.cuh)
// in parts of TPB vectors. The register-resident kernel holds the row, weight and bias in
// registers, which bounds its CTAs an SM (docs/PERF.md). Here a CTA holds no loads in flight and few registers, so occupancy is bounded by shared memory;
// Mean and variance: two exact passes over shared memory, or with ONE_PASS (bfloat16 rows up to
// 32 KB, see the host) one pass of shifted sums and one reduction.
// Grid: rows CTAs of TPB threads; dynamic shared memory N * sizeof(T) bytes.
#pragma once
#include "common/bulk_copy.cuh"
#include "common/dtypes.cuh"
#include "common/reduce.cuh"
#include "norm/layer_norm_fwd.cuh"  // layer_norm_affine

namespace tileops {

// (sum of d, sum of d^2) pairs: a + b is the same bit for bit as b + a (group_reduce's rule).
struct AddPair {
  __device__ __forceinline__ float2 operator()(float2 a, float2 b) const { return make_float2(a.x + b.x, a.y + b.y); }
};

template <typename T, int N, int VEC, int TPB, bool HAS_WEIGHT, bool HAS_BIAS, bool ONE_PASS>
__global__ void __launch_bounds__(TPB)
layer_norm_fwd_staged(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
                      long long rows, float eps) {
  using V = Vec<T, VEC>;
  constexpr int kVecs = N / VEC;
  using Stager = bulk::RowStager<V, kVecs, TPB, 1>;
  constexpr int kParts = Stager::kParts;
  constexpr bool kExact = kVecs % TPB == 0;
  extern __shared__ __align__(128) unsigned char staged_bytes[];
  __shared__ __align__(8) unsigned long long landed[kParts];
  __shared__ __align__(8) float scratch[TPB > 32 ? TPB / 16 : 2];  // a float2 a warp for ONE_PASS

  const Stager stager{reinterpret_cast<V*>(staged_bytes), landed};
  const V* wr = reinterpret_cast<const V*>(w);
  const V* br = reinterpret_cast<const V*>(b);
  auto issue = [&](long long r) { stager.issue(kVecs, reinterpret_cast<const V*>(x + r * N)); };
  auto normalise = [&](long long row) {
    const V* stage = stager.row();
    V* yr = reinterpret_cast<V*>(y + row * N);

    float mean, rstd;
    if constexpr (ONE_PASS) {
      // Sums of d = x - K and d^2 in one pass and one reduction, K the row's first element: the
      // shift keeps E[d^2] - E[d]^2 from cancelling (K lies within the row's spread).
      stager.wait(0);  // part 0 holds element 0 (every thread waits, whatever it owns)
      const float k = to_float(stage[0].v[0]);
      float2 acc = make_float2(0.f, 0.f);
      Stager::template for_each<kExact>(kVecs, [&](int i, int c) {
        stager.wait(i);
        const V v = stage[c];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float d = to_float(v.v[j]) - k;
          acc.x += d;
          acc.y = fmaf(d, d, acc.y);
        }
      });
      const float2 tot = group_reduce<TPB>(acc, reinterpret_cast<float2*>(scratch), AddPair{});
      const float dm = tot.x / N;
      mean = k + dm;
      const float var = tot.y / N - dm * dm;
      // Rounding may leave var a little below 0; a NaN (an inf in the row: inf - inf) must stay NaN,
      // as torch's row is NaN then, so no fmaxf (it would return 0 and the row would become -inf).
      rstd = rsqrtf((var < 0.f ? 0.f : var) + eps);
    } else {
      float sum = 0.f;
      Stager::template for_each<kExact>(kVecs, [&](int i, int c) {
        stager.wait(i);
        const V v = stage[c];
#pragma unroll
        for (int j = 0; j < VEC; ++j) sum += to_float(v.v[j]);
      });
      mean = group_sum<TPB>(sum, scratch) / N;
      if constexpr (TPB > 32) __syncthreads();  // scratch is reused by the second reduction
      float sq = 0.f;
      Stager::template for_each<kExact>(kVecs, [&](int i, int c) {
        const V v = stage[c];
#pragma unroll
        for (int j = 0; j < VEC; ++j) { const float d = to_float(v.v[j]) - mean; sq += d * d; }
      });
      rstd = rsqrtf(group_sum<TPB>(sq, scratch) / N + eps);
    }
    // Weight and bias are read here, not held in registers: fewer registers, more CTAs an SM.
    Stager::template for_each<kExact>(kVecs, [&](int, int c) {
      const V v = stage[c];
      V wv, bv;
      if constexpr (HAS_WEIGHT) wv = wr[c];
      if constexpr (HAS_BIAS) bv = br[c];
      yr[c] = layer_norm_affine<HAS_WEIGHT, HAS_BIAS>(v, wv, bv, mean, rstd);
    });
  };
  bulk::stage_row(stager, blockIdx.x, rows, issue, [] {}, normalise);
}

}  // namespace tileops

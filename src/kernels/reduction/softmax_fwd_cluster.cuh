// Softmax / log-softmax forward, cluster on-chip rows (sm_90+), for few long rows (lm-head logits):
// the CLUSTER CTAs of a thread-block cluster share one row, CTA k holding the k-th chunk in
// registers. Each CTA reduces its chunk to (max, sum of exp(x - max)); the pairs are pushed into
// every CTA's distributed shared memory and every CTA combines them in rank order, then writes its chunk from
// registers: one launch, one HBM read (the split kernels in softmax_fwd.cuh need two launches and
// a second read).
// Grid: rows * CLUSTER CTAs of TPB threads, launched with 1-D clusters of CLUSTER.
#pragma once
#include "common/cluster.cuh"
#include "reduction/softmax_fwd.cuh"

namespace tileops {

template <typename T, int N, int VEC, int TPB, int CLUSTER, bool LOG>
__global__ void __launch_bounds__(TPB) softmax_fwd_cluster(const T* __restrict__ x, T* __restrict__ y, long long /*rows*/) {
  using namespace softmax_detail;
  using V = Vec<T, VEC>;
  constexpr int kVecs = N / VEC;
  constexpr int kChunk = (kVecs + CLUSTER - 1) / CLUSTER;
  constexpr int kPerThread = (kChunk + TPB - 1) / TPB;
  constexpr bool kExact = kVecs % CLUSTER == 0 && kChunk % TPB == 0;
  __shared__ float scratch_max[TPB > 32 ? TPB / 32 : 1];
  __shared__ float scratch_sum[TPB > 32 ? TPB / 32 : 1];
  __shared__ float part_max[CLUSTER], part_sum[CLUSTER];  // pushed by every CTA (see rms_norm_fwd_cluster.cuh)

  const long long off = static_cast<long long>(blockIdx.x / CLUSTER) * N;
  const V* xr = reinterpret_cast<const V*>(x + off);
  V* yr = reinterpret_cast<V*>(y + off);
  const unsigned rank = cluster::rank();
  const int begin = static_cast<int>(rank) * kChunk;
  const int end = begin + kChunk < kVecs ? begin + kChunk : kVecs;

  cluster::arrive_relaxed();  // "started"; the matching wait() comes before any remote store
  V cache[kPerThread];
  float m = neg_inf();
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = begin + i * TPB + static_cast<int>(threadIdx.x);
    if (kExact || c < end) {
      cache[i] = xr[c];
#pragma unroll
      for (int j = 0; j < VEC; ++j) m = max_nan(m, to_float(cache[i].v[j]));
    }
  }
  const float cta_max = group_max<TPB>(m, scratch_max);
  float s = 0.f;
  if (cta_max != neg_inf()) {  // a chunk of -inf only adds nothing (and no -inf - -inf)
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = begin + i * TPB + static_cast<int>(threadIdx.x);
      if (kExact || c < end) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) s += fast_exp(to_float(cache[i].v[j]) - cta_max);
      }
    }
  }
  const float cta_sum = group_sum<TPB>(s, scratch_sum);
  cluster::wait();  // every CTA has started: its part_max / part_sum may be written
  if (threadIdx.x < CLUSTER) {
    cluster::store_remote(&part_max[rank], threadIdx.x, cta_max);
    cluster::store_remote(&part_sum[rank], threadIdx.x, cta_sum);
  }
  cluster::arrive();
  cluster::wait();
  float M = neg_inf();
#pragma unroll
  for (int r = 0; r < CLUSTER; ++r) M = max_nan(M, part_max[r]);
  float S = 0.f;
#pragma unroll
  for (int r = 0; r < CLUSTER; ++r) S += rescale(part_max[r], part_sum[r], M);
  const float inv_s = 1.f / S, log_s = LOG ? logf(S) : 0.f;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = begin + i * TPB + static_cast<int>(threadIdx.x);
    if (kExact || c < end) yr[c] = finish<T, VEC, LOG>(cache[i], M, inv_s, log_s);
  }
}

}  // namespace tileops

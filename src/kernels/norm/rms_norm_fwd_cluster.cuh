// RMSNorm forward, cluster on-chip rows (sm_90+): a row too long for one SM is split across the
// CLUSTER CTAs of a thread-block cluster. CTA k holds the k-th chunk of the row in registers, so
// each element is read from HBM once; the CTAs' partial sums of squares meet in distributed shared
// memory, added in rank order (the same order on every CTA and every run). This register variant
// serves accesses narrower than 16 bytes and fused-add chunks whose x + residual would exceed the
// staged budget (128 KB a CTA); rms_norm_fwd_staged.cuh (chunks in shared memory) the rest.
// Grid: rows * CLUSTER CTAs of TPB threads, launched with 1-D clusters of CLUSTER. Same arguments
// as the register-resident kernels in rms_norm_fwd.cuh (`rows` is implied by the grid).
#pragma once
#include "common/cluster.cuh"
#include "norm/rms_norm_fwd.cuh"

namespace tileops {

template <typename T, int N, int VEC, int TPB, int CLUSTER, bool HAS_WEIGHT, bool ADD_RESIDUAL>
__device__ __forceinline__ void rms_norm_cluster_row(const RowSource<T, VEC, ADD_RESIDUAL>& src, const T* __restrict__ w,
                                                     T* __restrict__ y, float eps) {
  using V = Vec<T, VEC>;
  constexpr int kVecs = N / VEC;
  constexpr int kChunk = (kVecs + CLUSTER - 1) / CLUSTER;  // vectors per CTA
  constexpr int kPerThread = (kChunk + TPB - 1) / TPB;
  constexpr bool kExact = kVecs % CLUSTER == 0 && kChunk % TPB == 0;
  // The weight is loaded with x when registers allow, so the scale pass does not wait on memory
  // after the cluster-wide reduction.
  constexpr bool kPrefetchW = HAS_WEIGHT && kPerThread * VEC * sizeof(T) <= 64;
  __shared__ float scratch[TPB > 32 ? TPB / 32 : 1];
  __shared__ float partials[CLUSTER];
  const unsigned rank = cluster::rank();
  const int begin = static_cast<int>(rank) * kChunk;
  const int end = begin + kChunk < kVecs ? begin + kChunk : kVecs;
  const V* wr = reinterpret_cast<const V*>(w);
  V* yr = reinterpret_cast<V*>(y);

  cluster::arrive_relaxed();  // "started"; the matching wait() comes before any remote store
  V cache[kPerThread];
  V wcache[kPrefetchW ? kPerThread : 1];
  typename RowSource<T, VEC, ADD_RESIDUAL>::Raw raw[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {  // every load first (see RowSource::load)
    const int c = begin + i * TPB + static_cast<int>(threadIdx.x);
    if (kExact || c < end) {
      raw[i] = src.load(c);
      if constexpr (kPrefetchW) wcache[i] = wr[c];
    }
  }
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = begin + i * TPB + static_cast<int>(threadIdx.x);
    if (kExact || c < end) {
      cache[i] = src.settle(c, raw[i]);
#pragma unroll
      for (int j = 0; j < VEC; ++j) { const float f = to_float(cache[i].v[j]); ss += f * f; }
    }
  }
  const float cta_sum = group_sum<TPB>(ss, scratch);
  // Each CTA pushes its sum into every CTA's `partials`: no CTA reads
  // a peer's shared memory after the barrier, so none has to wait for its readers before exiting.
  cluster::wait();  // every CTA has started: its `partials` may be written
  if (threadIdx.x < CLUSTER) cluster::store_remote(&partials[rank], threadIdx.x, cta_sum);
  cluster::arrive();
  cluster::wait();
  float total = 0.f;
#pragma unroll
  for (int r = 0; r < CLUSTER; ++r) total += partials[r];  // rank order on every CTA
  const float rs = rsqrtf(total / N + eps);
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = begin + i * TPB + static_cast<int>(threadIdx.x);
    if (kExact || c < end) {
      V wv;
      if constexpr (kPrefetchW) wv = wcache[i];
      else if constexpr (HAS_WEIGHT) wv = wr[c];
      yr[c] = rms_norm_scale<HAS_WEIGHT>(cache[i], wv, rs);
    }
  }
}

template <typename T, int N, int VEC, int TPB, int CLUSTER, bool HAS_WEIGHT>
__global__ void __launch_bounds__(TPB)
rms_norm_fwd_cluster(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, long long /*rows*/,
                     float eps) {
  using V = Vec<T, VEC>;
  const long long off = static_cast<long long>(blockIdx.x / CLUSTER) * N;
  const RowSource<T, VEC, false> src{reinterpret_cast<const V*>(x + off), nullptr, nullptr};
  rms_norm_cluster_row<T, N, VEC, TPB, CLUSTER, HAS_WEIGHT, false>(src, w, y + off, eps);
}

template <typename T, int N, int VEC, int TPB, int CLUSTER, bool HAS_WEIGHT>
__global__ void __launch_bounds__(TPB)
fused_add_rms_norm_fwd_cluster(const T* __restrict__ x, const T* residual_in, T* residual_out,
                               const T* __restrict__ w, T* __restrict__ y, long long /*rows*/, float eps) {
  using V = Vec<T, VEC>;
  const long long off = static_cast<long long>(blockIdx.x / CLUSTER) * N;
  const RowSource<T, VEC, true> src{reinterpret_cast<const V*>(x + off), reinterpret_cast<const V*>(residual_in + off),
                                    reinterpret_cast<V*>(residual_out + off)};
  rms_norm_cluster_row<T, N, VEC, TPB, CLUSTER, HAS_WEIGHT, true>(src, w, y + off, eps);
}

}  // namespace tileops

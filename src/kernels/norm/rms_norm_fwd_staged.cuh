// RMSNorm forward (and the fused add), staged rows (sm_90+, 16-byte accesses): a row, or with
// CLUSTER > 1 its k-th chunk on CTA k of a thread-block cluster, is brought into shared memory by
// bulk asynchronous copies instead of into registers. A CTA then holds few registers and no loads
// in flight, so more of them fit an SM (docs/PERF.md). The chunk arrives in parts of TPB vectors, each with its
// own mbarrier, so threads sum the first part while the later ones are in flight.
// With CLUSTER > 1 each CTA pushes its partial sum of squares into every CTA's shared memory before
// one cluster barrier and adds them in rank order (the same on every CTA and every run); no CTA
// waits after writing its output (a trailing barrier would fence every store).
// With ADD_RESIDUAL (FusedAddRMSNormFwdOp) x and residual are both staged; s = T(x + residual)
// is stored to residual_out (which may alias residual_in: each element is written by the thread
// that read it, after its part landed) and replaces x in shared memory for the scale pass.
// Grid: rows * CLUSTER CTAs (1-D clusters when CLUSTER > 1), TPB threads. Dynamic shared memory:
// kChunk * 16 bytes, twice that with ADD_RESIDUAL (RowNormSpec::smem_bytes).
#pragma once
#include "common/bulk_copy.cuh"
#include "common/dtypes.cuh"
#include "common/cluster.cuh"
#include "common/reduce.cuh"
#include "norm/rms_norm_fwd.cuh"  // rms_norm_scale

namespace tileops {

template <typename T, int N, int VEC, int TPB, int CLUSTER, bool HAS_WEIGHT, bool ADD_RESIDUAL>
__device__ __forceinline__ void rms_norm_staged_rows(const T* __restrict__ x, const T* residual_in, T* residual_out,
                                                     const T* __restrict__ w, T* __restrict__ y, long long rows,
                                                     float eps) {
  using V = Vec<T, VEC>;
  static_assert(sizeof(V) == 16, "bulk copies move multiples of 16 bytes");
  constexpr int kVecs = N / VEC;
  constexpr int kChunk = (kVecs + CLUSTER - 1) / CLUSTER;  // vectors per CTA
  using Stager = bulk::RowStager<V, kChunk, TPB, ADD_RESIDUAL ? 2 : 1>;
  constexpr int kParts = Stager::kParts;
  constexpr bool kExact = kVecs % CLUSTER == 0 && kChunk % TPB == 0;
  // Weight vectors are loaded while the row is in flight when they fit 128 bytes a thread.
  constexpr bool kCacheW = HAS_WEIGHT && kParts * 16 <= 128;
  extern __shared__ __align__(128) unsigned char staged_bytes[];
  __shared__ __align__(8) unsigned long long landed[kParts];
  __shared__ float scratch[TPB > 32 ? TPB / 32 : 1];
  __shared__ float partials[CLUSTER];

  const Stager stager{reinterpret_cast<V*>(staged_bytes), landed};
  unsigned rank = 0;
  if constexpr (CLUSTER > 1) {
    rank = cluster::rank();
    cluster::arrive_relaxed();  // "started"; the matching wait() comes before any remote store
  }
  const int begin = static_cast<int>(rank) * kChunk;
  const int count = begin + kChunk < kVecs ? kChunk : kVecs - begin;  // vectors of this CTA
  const V* wr = HAS_WEIGHT ? reinterpret_cast<const V*>(w) + begin : nullptr;
  const int t = static_cast<int>(threadIdx.x);
  const long long row = blockIdx.x / CLUSTER;
  auto chunk_of = [&](const T* base, long long r) { return reinterpret_cast<const V*>(base + r * N) + begin; };
  auto issue = [&](long long r) {
    stager.issue(count, chunk_of(x, r), ADD_RESIDUAL ? chunk_of(residual_in, r) : nullptr);
  };
  V wcache[kCacheW ? kParts : 1];
  auto load_weight = [&] {
    if constexpr (kCacheW) {
      Stager::template for_each<kExact>(count, [&](int i, int c) { wcache[i] = bulk::load_before_waits(wr + c); });
    }
  };
  auto normalise = [&](long long at) {
    V* stage = stager.row(0);
    const long long off = at * N;
    V* rout = ADD_RESIDUAL ? reinterpret_cast<V*>(residual_out + off) + begin : nullptr;
    V* yr = reinterpret_cast<V*>(y + off) + begin;

    float ss = 0.f;
    Stager::template for_each<kExact>(count, [&](int i, int c) {
      stager.wait(i);
      V v = stage[c];
      if constexpr (ADD_RESIDUAL) {
        const V res = stager.row(1)[c];
#pragma unroll
        for (int j = 0; j < VEC; ++j) v.v[j] = from_float<T>(to_float(v.v[j]) + to_float(res.v[j]));
        rout[c] = v;  // residual_out may alias residual_in: this thread read element c (staged) first
        stage[c] = v;  // the scale pass normalises the rounded sum
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) { const float f = to_float(v.v[j]); ss += f * f; }
    });
    float total = group_sum<TPB>(ss, scratch);
    if constexpr (CLUSTER > 1) {
      cluster::wait();  // every CTA has started: its `partials` may be written
      if (t < CLUSTER) cluster::store_remote(&partials[rank], static_cast<unsigned>(t), total);
      cluster::arrive();  // release: the pushes above ...
      cluster::wait();    // ... are visible here, from every CTA
      total = 0.f;
#pragma unroll
      for (int r = 0; r < CLUSTER; ++r) total += partials[r];  // rank order on every CTA
    }
    const float rs = rsqrtf(total / N + eps);
    Stager::template for_each<kExact>(count, [&](int i, int c) {
      const V v = stage[c];
      V wv;
      if constexpr (kCacheW) wv = wcache[i];
      else if constexpr (HAS_WEIGHT) wv = wr[c];
      yr[c] = rms_norm_scale<HAS_WEIGHT>(v, wv, rs);
    });
  };
  // A cluster's grid is exactly rows * CLUSTER CTAs: its row always exists.
  bulk::stage_row(stager, row, CLUSTER > 1 ? row + 1 : rows, issue, load_weight, normalise);
}

template <typename T, int N, int VEC, int TPB, int CLUSTER, bool HAS_WEIGHT>
__global__ void __launch_bounds__(TPB)
rms_norm_fwd_staged(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, long long rows, float eps) {
  rms_norm_staged_rows<T, N, VEC, TPB, CLUSTER, HAS_WEIGHT, false>(x, nullptr, nullptr, w, y, rows, eps);
}

template <typename T, int N, int VEC, int TPB, int CLUSTER, bool HAS_WEIGHT>
__global__ void __launch_bounds__(TPB)
fused_add_rms_norm_fwd_staged(const T* __restrict__ x, const T* residual_in, T* residual_out,
                              const T* __restrict__ w, T* __restrict__ y, long long rows, float eps) {
  rms_norm_staged_rows<T, N, VEC, TPB, CLUSTER, HAS_WEIGHT, true>(x, residual_in, residual_out, w, y, rows, eps);
}

}  // namespace tileops

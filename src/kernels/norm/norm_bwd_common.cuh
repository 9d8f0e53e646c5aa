// Machinery shared by the RMSNorm and LayerNorm backward kernels (rms_norm_bwd.cuh,
// layer_norm_bwd.cuh). Host side: src/targets/nvrtc/norm/norm_bwd_plan.cpp.
//
// Layout of the main kernels: a persistent grid of G CTAs (G fixed per build and device, so the
// dweight/dbias summation order never changes); a CTA holds ROWS row groups of TPR threads and walks
// rows blockIdx.x * ROWS + group, += G * ROWS. Thread t of a group owns the VEC-wide vectors
// t, t + TPR, ... of every row it handles, and so always the same columns: its per-column fp32
// partials of dweight/dbias stay in registers (ACC_REG) or, for rows too long for that, in the CTA's
// own row of the workspace (read-modify-write by the one owning thread). At the end each CTA leaves
// one partial row per gradient in the workspace [G, N]; norm_bwd_reduce sums those rows in a fixed
// order and rounds once to T. The main kernel lets that reduction be scheduled as soon as it starts
// (allow_dependent_launch); the reduction waits for its end before reading (grid_dependency.cuh).
//
// SMEM: the rows are staged in shared memory one row ahead with cp.async (each thread copies and
// later reads only its own vectors, so the pipeline needs no barrier), which keeps the next row's
// loads in flight while the current one is reduced and written. Otherwise the passes read x and dy
// from global memory (second and third reads mostly hit L1/L2).
#pragma once
#include "common/dtypes.cuh"
#include "common/grid_dependency.cuh"
#include "norm/norm_weight.cuh"

namespace tileops {
namespace norm_bwd {

// K sums over the TPR threads of one row group, every thread of the group gets the totals (bitwise
// the same in each: xor butterflies add the same pair in both lanes). TPR <= 32: shuffles only.
// TPR > 32: the group is TPR / 32 whole warps; `scratch` holds K * TPR / 32 floats for this group and
// must not be reused before the next __syncthreads (callers alternate buffers). Every thread of the
// CTA calls this the same number of times (it contains __syncthreads when TPR > 32).
template <int TPR, int K>
__device__ __forceinline__ void group_sum(float (&v)[K], float* scratch) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int offset = (TPR < 32 ? TPR : 32) / 2; offset > 0; offset /= 2)
      v[k] += __shfl_xor_sync(0xffffffffu, v[k], offset);
  }
  if constexpr (TPR > 32) {
    constexpr int kWarps = TPR / 32;
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % TPR) / 32;
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) scratch[k * kWarps + warp] = v[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < K; ++k) {
      v[k] = lane < kWarps ? scratch[k * kWarps + lane] : 0.f;
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) v[k] += __shfl_xor_sync(0xffffffffu, v[k], offset);
    }
  }
}

// Shared memory is addressed with 32-bit shared-window addresses (fewer registers than generic
// pointers in the hot loops).
__device__ __forceinline__ unsigned smem_address(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

// A load from shared memory the compiler may not merge with an earlier one: the passes over a staged
// row re-read it instead of keeping it live in registers across the row reduction.
template <typename V>
__device__ __forceinline__ V load_shared(unsigned a) {
  static_assert(sizeof(V) == 2 || sizeof(V) == 4 || sizeof(V) == 8 || sizeof(V) == 16, "vector size");
  V v;
  if constexpr (sizeof(V) == 16) {
    unsigned* u = reinterpret_cast<unsigned*>(&v);
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "r"(a));
  } else if constexpr (sizeof(V) == 8) {
    unsigned* u = reinterpret_cast<unsigned*>(&v);
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(u[0]), "=r"(u[1]) : "r"(a));
  } else if constexpr (sizeof(V) == 4) {
    unsigned* u = reinterpret_cast<unsigned*>(&v);
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(u[0]) : "r"(a));
  } else {
    unsigned short* u = reinterpret_cast<unsigned short*>(&v);
    asm volatile("ld.shared.u16 %0, [%1];" : "=h"(u[0]) : "r"(a));
  }
  return v;
}

template <typename V>
__device__ __forceinline__ void store_shared(unsigned a, const V& v) {
  static_assert(sizeof(V) == 2 || sizeof(V) == 4 || sizeof(V) == 8 || sizeof(V) == 16, "vector size");
  if constexpr (sizeof(V) == 16) {
    const unsigned* u = reinterpret_cast<const unsigned*>(&v);
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(u[0]), "r"(u[1]), "r"(u[2]), "r"(u[3])
                 : "memory");
  } else if constexpr (sizeof(V) == 8) {
    const unsigned* u = reinterpret_cast<const unsigned*>(&v);
    asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(a), "r"(u[0]), "r"(u[1]) : "memory");
  } else if constexpr (sizeof(V) == 4) {
    const unsigned* u = reinterpret_cast<const unsigned*>(&v);
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"(u[0]) : "memory");
  } else {
    const unsigned short* u = reinterpret_cast<const unsigned short*>(&v);
    asm volatile("st.shared.u16 [%0], %1;" ::"r"(a), "h"(u[0]) : "memory");
  }
}

// Asynchronous copy of one V from global to shared memory (cp.async moves 4, 8 or 16 bytes; sm_80+).
// Older archs copy synchronously, which keeps the kernels correct there.
template <typename V>
__device__ __forceinline__ void copy_async(unsigned smem, const V* gmem) {
  static_assert(sizeof(V) == 4 || sizeof(V) == 8 || sizeof(V) == 16, "cp.async copies 4, 8 or 16 bytes");
#if __CUDA_ARCH__ >= 800
  unsigned long long g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(gmem));
  if constexpr (sizeof(V) == 16) {
    // .cg: the row is read once, keep it out of L1.
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(g) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(smem), "l"(g), "n"(sizeof(V)) : "memory");
  }
#else
  store_shared(smem, *gmem);
#endif
}

__device__ __forceinline__ void copy_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most PENDING of this thread's committed groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void copy_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
#endif
}

// Calls f(i, c) for the vectors c = i * TPR + t (i = 0, 1, ...) of a row of VECS vectors. UNROLL:
// i is a compile-time constant in each call (register arrays indexed by i stay in registers).
template <int TPR, int VECS, bool UNROLL, typename F>
__device__ __forceinline__ void for_my_vecs(int t, F&& f) {
  constexpr int kPer = (VECS + TPR - 1) / TPR;
  constexpr bool kExact = VECS % TPR == 0;
  if constexpr (UNROLL) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = i * TPR + t;
      if (kExact || c < VECS) f(i, c);
    }
  } else {
#pragma unroll 2
    for (int c = t; c < VECS; c += TPR) f(0, c);
  }
}

// The x and dy vectors of the row a thread works on: from the shared-memory stage (SMEM) or from
// global memory. Shared layout: [2 stages][ROWS groups][x, dy][N] of T, then the weight [N] of W.
template <typename T, int N, int VEC, int TPR, int ROWS, bool SMEM>
struct RowSource {
  using V = Vec<T, VEC>;
  static constexpr int kVecs = N / VEC;
  static constexpr unsigned kVB = sizeof(V);  // bytes per vector
  // Bytes the two stages take (the weight copy follows them; the host computes the same sizes).
  static constexpr unsigned kStageBytes = 2u * ROWS * 2 * N * sizeof(T);
  const V* x;       // global x, dy (whole tensors)
  const V* dy;
  unsigned stage;   // SMEM: shared address of this group's x row in stage 0
  long long rows;

  __device__ __forceinline__ unsigned stage_x(int s) const { return stage + s * (kStageBytes / 2); }

  // SMEM: starts copying row `row` (if it exists) into stage s; always commits a group, so that the
  // wait below counts one group per row.
  template <bool UNROLL>
  __device__ __forceinline__ void prefetch(long long row, int s, int t) const {
    if constexpr (SMEM) {
      if (row < rows) {
        const unsigned sx = stage_x(s);
        const V* gx = x + row * kVecs;
        const V* gd = dy + row * kVecs;
        for_my_vecs<TPR, kVecs, UNROLL>(t, [&](int, int c) {
          copy_async(sx + c * kVB, gx + c);
          copy_async(sx + (kVecs + c) * kVB, gd + c);
        });
      }
      copy_async_commit();
    }
  }
  __device__ __forceinline__ V load_x(long long row, int s, int c) const {
    if constexpr (SMEM) return load_shared<V>(stage_x(s) + c * kVB);
    else return x[row * kVecs + c];
  }
  __device__ __forceinline__ V load_dy(long long row, int s, int c) const {
    if constexpr (SMEM) return load_shared<V>(stage_x(s) + (kVecs + c) * kVB);
    else return dy[row * kVecs + c];
  }
};

// The start both backward kernels share: group `grp`'s row source, the weight's shared copy (SMEM:
// group 0's asynchronous copies, a commit group of their own ahead of the first row's, so both are in
// flight together; the first iteration waits for both and synchronises before any thread reads the
// weight) and the first row's prefetch. weight(c) reads vector c of the weight (W: T, or float32
// beside a 16-bit row), in pieces of at most 16 bytes.
template <typename T, int N, int VEC, int TPR, int ROWS, bool HAS_WEIGHT, bool SMEM, bool UNROLL, typename W = T>
struct RowStart {
  using V = Vec<T, VEC>;
  using WV = WeightVec<W, VEC>;
  using WP = Vec<W, WV::kPart>;
  static constexpr int kParts = VEC / WV::kPart;
  using Source = RowSource<T, N, VEC, TPR, ROWS, SMEM>;
  Source src;
  const W* wg;
  unsigned wsm;  // SMEM: shared address of the weight's copy, after the stages

  __device__ __forceinline__ RowStart(const T* x, const T* dy, const W* w, unsigned smem_base, long long rows, int t,
                                      int grp)
      : src{reinterpret_cast<const V*>(x), reinterpret_cast<const V*>(dy),
            smem_base + grp * 2 * Source::kVecs * Source::kVB, rows},
        wg(w),
        wsm(smem_base + Source::kStageBytes) {
    if constexpr (SMEM && HAS_WEIGHT) {
      if (grp == 0)
        for_my_vecs<TPR, Source::kVecs, UNROLL>(t, [&](int, int c) {
          const WP* from = reinterpret_cast<const WP*>(wg) + c * kParts;
#pragma unroll
          for (int k = 0; k < kParts; ++k) copy_async(wsm + (c * kParts + k) * unsigned{sizeof(WP)}, from + k);
        });
      copy_async_commit();
    }
    src.template prefetch<UNROLL>(static_cast<long long>(blockIdx.x) * ROWS + grp, 0, t);
  }
  __device__ __forceinline__ WV weight(int c) const {
    WV v;
    if constexpr (SMEM) {
#pragma unroll
      for (int k = 0; k < kParts; ++k) v.part[k] = load_shared<WP>(wsm + (c * kParts + k) * unsigned{sizeof(WP)});
    } else {
      v.load(wg, c);
    }
    return v;
  }
};

// One thread's per-column partials of one gradient: VEC floats per owned vector (accessed 16 bytes
// at a time at most: that is all the alignment shared memory and the workspace rows promise).
template <int VEC>
struct alignas(sizeof(float) * VEC > 16 ? 16 : sizeof(float) * VEC) FVec {
  float v[VEC];
};

// Writes a CTA's per-column partials (ACC_REG) to its workspace row `out` [N]. With several row
// groups per CTA the groups are first combined, in a fixed order: a butterfly across the groups of a
// warp (TPR < 32), then the warps' (or, TPR >= 32, the groups') rows summed slot by slot in shared
// memory `comb` ([slots][N] floats; may alias the stages: the caller has finished with them and
// synchronised). Call from every thread of the CTA.
template <int N, int VEC, int TPR, int ROWS, int PER>
__device__ __forceinline__ void store_partials(const FVec<VEC> (&acc)[PER], float* __restrict__ out, float* comb) {
  constexpr int kVecs = N / VEC;
  const int t = threadIdx.x % TPR;
  if constexpr (ROWS == 1) {
    FVec<VEC>* o = reinterpret_cast<FVec<VEC>*>(out);
    for_my_vecs<TPR, kVecs, true>(t, [&](int i, int c) { o[c] = acc[i]; });
  } else {
    constexpr int kThreads = TPR * ROWS;
    constexpr int kSlots = TPR < 32 ? kThreads / 32 : ROWS;
    FVec<VEC> a[PER];
#pragma unroll
    for (int i = 0; i < PER; ++i) a[i] = acc[i];
    if constexpr (TPR < 32) {
#pragma unroll
      for (int offset = TPR; offset < 32; offset *= 2) {
#pragma unroll
        for (int i = 0; i < PER; ++i) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) a[i].v[j] += __shfl_xor_sync(0xffffffffu, a[i].v[j], offset);
        }
      }
    }
    const int lane = threadIdx.x % 32;
    const bool writer = TPR >= 32 || lane < TPR;  // the first group of each warp holds the warp's sums
    const int slot = TPR < 32 ? static_cast<int>(threadIdx.x / 32) : static_cast<int>(threadIdx.x / TPR);
    if (writer) {
      FVec<VEC>* row = reinterpret_cast<FVec<VEC>*>(comb + slot * N);
      for_my_vecs<TPR, kVecs, true>(t, [&](int i, int c) { row[c] = a[i]; });
    }
    __syncthreads();
    for (int col = threadIdx.x; col < N; col += kThreads) {
      float s = comb[col];
#pragma unroll
      for (int k = 1; k < kSlots; ++k) s += comb[k * N + col];
      out[col] = s;
    }
    __syncthreads();  // comb is reused by the next gradient's partials
  }
}

}  // namespace norm_bwd

// Sums the workspace rows part[0 .. parts-1][n] per column, in a fixed order (warp w adds rows w,
// w + kReduceWarps, ... in turn, then the warps' sums are added in warp order), and rounds once to T.
// parts == 0 (no rows) writes zeros. Grid: ceil(n / 32) CTAs of 32 * kReduceWarps threads, two an SM
// (registers capped at 32); lane = column. 32 warps, not 8: with one CTA per 32 columns the loads
// in flight per SM bound this kernel (docs/PERF.md).
constexpr int kReduceWarps = 32;

template <typename T, bool DW, bool DB>
__global__ void __launch_bounds__(32 * kReduceWarps, 2)
norm_bwd_reduce(const float* __restrict__ part_w, const float* __restrict__ part_b, T* __restrict__ dweight,
                T* __restrict__ dbias, int parts, int n) {
  __shared__ float sw[DW ? kReduceWarps : 1][32];
  __shared__ float sb[DB ? kReduceWarps : 1][32];
  // Launched as a programmatic dependent of the main kernel: its partial rows are complete only now.
  wait_for_prior_grid();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = blockIdx.x * 32 + lane;
  float aw = 0.f, ab = 0.f;
  if (col < n) {
    // The rows of a warp are loaded kBatch at a time, all in flight together (a grid of 132 CTAs
    // leaves 4-5 rows a warp: one round trip to L2, where a loop unrolled by 4 made two), and then
    // added in row order; a missing row adds +0, which changes no sum. Both gradients: 4 a batch,
    // within the 32 registers that keep two CTAs an SM (wide rows have 2 waves of these CTAs).
    constexpr int kBatch = DW && DB ? 4 : 8;
    for (int p0 = warp; p0 < parts; p0 += kBatch * kReduceWarps) {
      float vw[kBatch], vb[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int p = p0 + b * kReduceWarps;
        const long long at = static_cast<long long>(p) * n + col;
        if constexpr (DW) vw[b] = p < parts ? part_w[at] : 0.f;
        if constexpr (DB) vb[b] = p < parts ? part_b[at] : 0.f;
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if constexpr (DW) aw += vw[b];
        if constexpr (DB) ab += vb[b];
      }
    }
  }
  if constexpr (DW) sw[warp][lane] = aw;
  if constexpr (DB) sb[warp][lane] = ab;
  __syncthreads();
  if (warp == 0 && col < n) {
    if constexpr (DW) {
      float s = sw[0][lane];
#pragma unroll
      for (int w = 1; w < kReduceWarps; ++w) s += sw[w][lane];
      dweight[col] = from_float<T>(s);
    }
    if constexpr (DB) {
      float s = sb[0][lane];
#pragma unroll
      for (int w = 1; w < kReduceWarps; ++w) s += sb[w][lane];
      dbias[col] = from_float<T>(s);
    }
  }
}

}  // namespace tileops

// Decode attention over a KV cache, split along the cache (flash-decoding): a CTA takes one KV head
// of one request, G of the query rows that read it (GQA's group, or MHA decode's query tokens) and
// one of `splits` chunks of the request's tokens; an online softmax in float32 (base 2) per row.
// With one split it writes o; with more, each split writes its normalised o and log-sum-exp
// (float32) and decode_merge combines them.
//
// Layout: kDecodeWarps warps; LANES lanes hold one token's D dims (NV accesses of VEC elements
// each, lane `sub` holding accesses sub, sub + LANES, ...), so a warp reads 32 / LANES tokens at a
// time and the CTA SLOTS tokens; each token slot keeps its own softmax state, combined at the end
// (shuffles within a warp, shared memory across warps). Dims past `dim` (D not a multiple of the
// access) read nothing. Scores: s = (q . k) * scale, then softcap * tanh(s / softcap) when
// softcap > 0. Paged: token t of request b is row block_table[b, t / page_size] * page_size +
// t % page_size; a request's length is clamped to [0, pages * page_size] and a page outside the pool
// is skipped (memory stays in bounds; the reference target refuses such data by name).
// Host side: src/targets/nvrtc/attention/decode.cpp.
#pragma once
#include "common/dtypes.cuh"
#include "common/grid_dependency.cuh"

namespace tileops {

constexpr int kDecodeWarps = 4;
constexpr float kDecodeLog2e = 1.4426950408889634f;
__device__ __forceinline__ float decode_neg_inf() { return __int_as_float(0xff800000); }

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> decode_load(const T* p, bool valid) {
  Vec<T, VEC> x{};  // all bits zero: +0 in every float type
  if (valid) x = *reinterpret_cast<const Vec<T, VEC>*>(p);
  return x;
}

// Merges softmax state (m2, l2, acc2) into (m, l, acc): m in base 2, -inf for no token yet.
template <int E>
__device__ __forceinline__ void decode_combine(float& m, float& l, float (&acc)[E], float m2, float l2,
                                               const float (&acc2)[E]) {
  const float mn = fmaxf(m, m2);
  const float c1 = m == decode_neg_inf() ? 0.f : exp2f(m - mn);
  const float c2 = m2 == decode_neg_inf() ? 0.f : exp2f(m2 - mn);
  l = l * c1 + l2 * c2;
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] = acc[e] * c1 + acc2[e] * c2;
  m = mn;
}

template <typename T, int VEC, int LANES, int NV, int G, bool PAGED>
__global__ void __launch_bounds__(kDecodeWarps * 32, 1)  // min 1 CTA an SM: without it ptxas spilled at 72 registers
decode_fwd(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o,
           float* __restrict__ part_o, float* __restrict__ part_lse, const int* __restrict__ lengths,
           const int* __restrict__ block_table, long long q_sb, long long q_sh, long long q_sg, long long o_sb,
           long long o_sh, long long o_sg, long long kv_sb, long long kv_st, long long kv_sh, int dim, int n_kv,
           int page_size, int pages, int pool_pages, int kv_heads, int group, int g_tiles, int splits,
           long long rows, float scale, float softcap) {
  static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0, "LANES: a power of two within a warp");
  constexpr int TPW = 32 / LANES;
  constexpr int SLOTS = kDecodeWarps * TPW;
  constexpr int E = NV * VEC;
  using V = Vec<T, VEC>;
  __shared__ float sm_m[kDecodeWarps][G], sm_l[kDecodeWarps][G];
  __shared__ float sm_acc[kDecodeWarps][G][LANES * E];

  // 32-bit index math (the grid is below 2^31 CTAs): a 64-bit division is a call with a stack frame.
  int bid = static_cast<int>(blockIdx.x);
  const int split = bid % splits;
  bid /= splits;
  const int gt = bid % g_tiles;
  bid /= g_tiles;
  const int kvh = bid % kv_heads;
  const long long b = bid / kv_heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sub = lane % LANES;
  const int g0 = gt * G;

  int len = n_kv;
  if (lengths != nullptr) len = min(max(lengths[b], 0), n_kv);
  const int chunk = (len + splits - 1) / splits;
  const int t0 = min(len, split * chunk), t1 = min(len, t0 + chunk);

  // The rows' queries in float32, times the scale (base 2 unless a softcap comes between).
  const float q_mul = softcap > 0.f ? scale : scale * kDecodeLog2e;
  float qf[G][E];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const bool row_ok = g0 + g < group;
    const T* qr = q + b * q_sb + kvh * q_sh + static_cast<long long>(row_ok ? g0 + g : 0) * q_sg;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int d0 = (i * LANES + sub) * VEC;
      const V x = decode_load<T, VEC>(qr + d0, row_ok && d0 < dim);
#pragma unroll
      for (int j = 0; j < VEC; ++j) qf[g][i * VEC + j] = to_float(x.v[j]) * q_mul;
    }
  }

  float m[G], l[G], acc[G][E];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = decode_neg_inf();
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[g][e] = 0.f;
  }

  const T* kb = k + b * kv_sb + kvh * kv_sh;
  const T* vb = v + b * kv_sb + kvh * kv_sh;
  // Warp-uniform trip count: every lane takes part in the shuffles; a slot past the chunk (or on a
  // row outside the pool) reads nothing and leaves its state alone.
  for (int tw = t0 + warp * TPW; tw < t1; tw += SLOTS) {
    const int t = tw + lane / LANES;
    bool active = t < t1;
    long long row = t;
    if constexpr (PAGED) {
      const int page = active ? block_table[b * pages + t / page_size] : 0;
      active = active && page >= 0 && page < pool_pages;
      row = static_cast<long long>(page) * page_size + t % page_size;
    }
    V kx[NV], vx[NV];
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int d0 = (i * LANES + sub) * VEC;
      kx[i] = decode_load<T, VEC>(kb + row * kv_st + d0, active && d0 < dim);
      vx[i] = decode_load<T, VEC>(vb + row * kv_st + d0, active && d0 < dim);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float s = 0.f;
#pragma unroll
      for (int i = 0; i < NV; ++i)
#pragma unroll
        for (int j = 0; j < VEC; ++j) s += qf[g][i * VEC + j] * to_float(kx[i].v[j]);
#pragma unroll
      for (int off = LANES / 2; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (!active) continue;
      if (softcap > 0.f) s = softcap * tanhf(s / softcap) * kDecodeLog2e;
      const float mn = fmaxf(m[g], s);
      const float c = exp2f(m[g] - mn), p = exp2f(s - mn);  // m = -inf: c = 0
      l[g] = l[g] * c + p;
#pragma unroll
      for (int i = 0; i < NV; ++i)
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[g][i * VEC + j] = acc[g][i * VEC + j] * c + p * to_float(vx[i].v[j]);
      m[g] = mn;
    }
  }

  // The warp's token slots into its first (lanes 0..LANES-1 hold the same dims as each slot's).
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int off = LANES; off < 32; off *= 2) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m[g], off), l2 = __shfl_xor_sync(0xffffffffu, l[g], off);
      float acc2[E];
#pragma unroll
      for (int e = 0; e < E; ++e) acc2[e] = __shfl_xor_sync(0xffffffffu, acc[g][e], off);
      decode_combine<E>(m[g], l[g], acc[g], m2, l2, acc2);
    }
    if (lane < LANES) {
      if (sub == 0) {
        sm_m[warp][g] = m[g];
        sm_l[warp][g] = l[g];
      }
#pragma unroll
      for (int e = 0; e < E; ++e) sm_acc[warp][g][sub * E + e] = acc[g][e];
    }
  }
  __syncthreads();
  if (warp != 0 || lane >= LANES) return;
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int w = 1; w < kDecodeWarps; ++w) {
      float acc2[E];
#pragma unroll
      for (int e = 0; e < E; ++e) acc2[e] = sm_acc[w][g][sub * E + e];
      decode_combine<E>(m[g], l[g], acc[g], sm_m[w][g], sm_l[w][g], acc2);
    }
    if (g0 + g >= group) continue;
    const float inv = l[g] > 0.f ? 1.f / l[g] : 0.f;  // no token: zeros
    const long long row_id = (b * kv_heads + kvh) * group + g0 + g;
    if (part_o == nullptr) {
      T* orow = o + b * o_sb + kvh * o_sh + static_cast<long long>(g0 + g) * o_sg;
#pragma unroll
      for (int i = 0; i < NV; ++i) {
        const int d0 = (i * LANES + sub) * VEC;
        if (d0 >= dim) continue;
        V y;
#pragma unroll
        for (int j = 0; j < VEC; ++j) y.v[j] = from_float<T>(acc[g][i * VEC + j] * inv);
        *reinterpret_cast<V*>(orow + d0) = y;
      }
    } else {
      float* prow = part_o + (static_cast<long long>(split) * rows + row_id) * dim;
#pragma unroll
      for (int i = 0; i < NV; ++i) {
        const int d0 = (i * LANES + sub) * VEC;
        if (d0 >= dim) continue;
#pragma unroll
        for (int j = 0; j < VEC; ++j) prow[d0 + j] = acc[g][i * VEC + j] * inv;
      }
      if (sub == 0) part_lse[static_cast<long long>(split) * rows + row_id] = l[g] > 0.f ? m[g] + log2f(l[g]) : decode_neg_inf();
    }
  }
}

// Combines the splits of decode_fwd: o = sum_i 2^(lse_i - M) o_i / sum_i 2^(lse_i - M), M the largest
// lse; a row whose splits are all empty gets zeros. A CTA of 128 threads a row, threads over dims.
// Launched as a programmatic dependent of the split kernel where the GPU allows: it waits for that
// grid before reading.
template <typename T>
__global__ void __launch_bounds__(128)
decode_merge(const float* __restrict__ part_o, const float* __restrict__ part_lse, T* __restrict__ o,
             long long o_sb, long long o_sh, long long o_sg, int dim, int kv_heads, int group, int splits,
             long long rows) {
  const int row = static_cast<int>(blockIdx.x);  // rows < 2^31: the grid
  const long long row_id = row;
  const int g = row % group;
  const int kvh = row / group % kv_heads;
  const long long b = row / group / kv_heads;
  wait_for_prior_grid();
  float mx = decode_neg_inf();
  for (int s = 0; s < splits; ++s) mx = fmaxf(mx, part_lse[s * rows + row_id]);
  T* orow = o + b * o_sb + kvh * o_sh + static_cast<long long>(g) * o_sg;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    float num = 0.f, den = 0.f;
    if (mx != decode_neg_inf()) {
      for (int s = 0; s < splits; ++s) {
        const float w = exp2f(part_lse[s * rows + row_id] - mx);
        num += w * part_o[(s * rows + row_id) * dim + d];
        den += w;
      }
    }
    orow[d] = from_float<T>(den > 0.f ? num / den : 0.f);
  }
}

}  // namespace tileops

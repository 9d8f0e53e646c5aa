// Attention forward over whole sequences on tensor cores, f16/bf16, head dim D of 64 or 128:
// o = softmax(q k^T * scale) v per request and query head, query head h reading KV head h / (H / H_kv).
// Requests are fixed-length ([B, S, heads, D]: request b's token t is row b * S + t) or packed
// (VARLEN: rows cu[b] .. cu[b + 1] of [total, heads, D], the offsets read on the device and clamped to
// the tensors' rows). PAGED (packed queries): request b's keys are the n_b = cache_seqlens[b] tokens
// of a paged cache, logical token p at pool row block_table[b, p / page_size] * page_size +
// p % page_size (n_b clamped to [0, pages * page_size]; a page outside the pool reads as zeros), then
// its own len_q new rows of k and v. A cache of T is copied as it is (kPagedDirect); with scales
// (kPagedScaled) or as float8_e4m3fn (kPagedFp8, 8 bytes a chunk into the chunk's upper half) it is
// copied the same way and, once landed, made round_T(cache * scale) in shared memory by the thread
// that copied it; the scales are read on the device (nullptr: 1). Query i of a request sits at key
// position i + len_kv - len_q and attends key j when j <= that position (causal), j >= position - left (left >= 0) and j <= position + right
// (right >= 0); a row that attends nothing is zeros. Scores are optionally soft-capped,
// softcap * tanh(s / softcap) (softcap > 0).
//
// A CTA takes 64 query rows of one (batch, head), kWarps warps of 16 rows each. The CTA streams the
// head's 64-token tiles of K and V through a STAGES-deep cp.async pipeline in shared memory; every
// warp reads each tile: S = Q K^T and O += P V are m16n8k16 MMAs with the queries held in
// registers, and the softmax is online in float32, base 2, P rounded to T as FlashAttention does.
// A CTA reads only the tiles its rows' windows reach, and masks only the tiles on their edges.
// Tiles of D-element rows store 16-byte chunk c of row r at chunk c ^ (r % 8), so that the 8 rows
// an ldmatrix reads fall in distinct banks. The grid runs the last query tiles (a causal call's
// longest) first; it covers max_seqlen_q rows a request, and a CTA loops over a longer request's
// further tiles. O is staged through the warp's rows of the query tile for 16-byte stores.
// Host side: src/targets/nvrtc/attention/prefill.cpp.
#pragma once
#include "common/dtypes.cuh"
#include "attention/mma_softmax.cuh"
#include "common/fp8.cuh"
#include "common/mma.cuh"

namespace tileops {
namespace prefill {

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kRows = 64;  // query rows a CTA: 16 a warp
constexpr int kTile = 64;  // tokens a K/V tile
constexpr float kLog2e = 1.4426950408889634f;
// How the keys and values reach the kernel: whole tensors, or a paged cache (PAGED) stored as T
// and copied, as T times a scale, or as float8_e4m3fn times a scale.
constexpr int kUnpaged = 0, kPagedDirect = 1, kPagedScaled = 2, kPagedFp8 = 3;
template <bool FP8, typename T> struct CacheOf { using type = T; };
template <typename T> struct CacheOf<true, T> { using type = fp8_e4m3; };
template <typename T, int PAGED>
using CacheType = typename CacheOf<PAGED == kPagedFp8, T>::type;

__device__ __forceinline__ float cache_to_float(fp8_e4m3 v) { return e4m3_to_float(v.bits); }
template <typename T>
__device__ __forceinline__ float cache_to_float(T v) { return to_float(v); }

// 8 bytes global -> shared, asynchronously (zeros when !valid): a chunk of 8 float8_e4m3fn values.
__device__ __forceinline__ void copy8(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(dst), "l"(src), "r"(valid ? 8 : 0) : "memory");
}

// A landed 16-byte chunk of a cached row, in place: its 8 cache values (16-bit: the whole chunk;
// float8_e4m3fn: its upper 8 bytes, where the copy put them) times a scale, rounded to T.
template <typename T, typename C>
__device__ __forceinline__ void scale_chunk(T* chunk, float scale) {
  alignas(16) C in[8];
  if constexpr (sizeof(C) == 1) *reinterpret_cast<uint2*>(in) = *reinterpret_cast<const uint2*>(chunk + 4);
  else *reinterpret_cast<uint4*>(in) = *reinterpret_cast<const uint4*>(chunk);
  alignas(16) T out[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) out[e] = from_float<T>(__fmul_rn(cache_to_float(in[e]), scale));
  *reinterpret_cast<uint4*>(chunk) = *reinterpret_cast<const uint4*>(out);
}

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// Element offset of 16-byte chunk c of row r in a tile of D-element rows.
template <int D>
__device__ __forceinline__ int swizzle(int r, int c) {
  return r * D + ((c ^ (r & 7)) << 3);
}

}  // namespace prefill

// The paged forms ask for 2 CTAs an SM (a 255-register cap): left to itself ptxas capped D = 64 at
// 168 registers and spilled; 0 leaves the unpaged forms to ptxas.
template <typename T, int D, int STAGES, bool VARLEN, int PAGED>
__global__ void __launch_bounds__(prefill::kThreads, PAGED == prefill::kUnpaged ? 0 : 2)
    attention_prefill_fwd(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          T* __restrict__ o, const int* __restrict__ cu_q, const int* __restrict__ cu_kv,
                          int rows_q, int rows_kv, int heads, int kv_heads, int bh, int m_tiles, float scale,
                          float softcap, int causal, int left, int right,
                          const prefill::CacheType<T, PAGED>* __restrict__ k_pages,
                          const prefill::CacheType<T, PAGED>* __restrict__ v_pages,
                          const int* __restrict__ cache_seqlens, const int* __restrict__ block_table, int pages,
                          int page_size, int pool_pages, const float* __restrict__ k_scale,
                          const float* __restrict__ v_scale) {
  using namespace prefill;
  static_assert(D == 64 || D == 128, "D: 64 or 128 (the queries' and the output's fragments in registers)");
  static_assert(sizeof(T) == 2, "f16 or bf16");
  static_assert(STAGES >= 2, "a tile in flight while one is read");
  static_assert(PAGED == kUnpaged || VARLEN, "a paged cache goes with packed queries");
  constexpr int CH = D / 8;           // 16-byte chunks a row
  constexpr int TILE = kTile * D;     // elements of one K (or V) tile
  constexpr int NT = D / 8;           // n8 tiles of the output
  extern __shared__ __align__(16) unsigned char prefill_smem[];
  T* sq = reinterpret_cast<T*>(prefill_smem);  // [kRows][D], then [stage][K | V][kTile][D]
  T* skv = sq + kRows * D;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  const int bid = static_cast<int>(blockIdx.x);
  const int first_tile = m_tiles - 1 - bid / bh;  // the longest causal tiles first
  const int b = bid % bh / heads, h = bid % bh % heads;
  const int kvh = h / (heads / kv_heads);
  // The request's rows: fixed lengths rows_q and rows_kv a request, or its packed offsets clamped to
  // the tensors' rows_q and rows_kv rows.
  long long q_start, kv_start;
  int len_q, len_kv, n_old = 0;  // n_old: the request's cached tokens (PAGED), keys before its new rows
  if constexpr (PAGED != kUnpaged) {
    const int qs = min(max(cu_q[b], 0), rows_q);
    q_start = kv_start = qs;
    len_q = min(max(cu_q[b + 1], qs), rows_q) - qs;
    n_old = static_cast<int>(min(max(static_cast<long long>(cache_seqlens[b]), 0LL),
                                 static_cast<long long>(pages) * page_size));
    len_kv = n_old + len_q;
  } else if constexpr (VARLEN) {
    const int qs = min(max(cu_q[b], 0), rows_q), ks = min(max(cu_kv[b], 0), rows_kv);
    q_start = qs, kv_start = ks;
    len_q = min(max(cu_q[b + 1], qs), rows_q) - qs;
    len_kv = min(max(cu_kv[b + 1], ks), rows_kv) - ks;
  } else {
    q_start = static_cast<long long>(b) * rows_q, kv_start = static_cast<long long>(b) * rows_kv;
    len_q = rows_q, len_kv = rows_kv;
  }
  const int shift = len_kv - len_q;  // query i's key position: i + shift
  const long long q_row = static_cast<long long>(heads) * D, kv_row = static_cast<long long>(kv_heads) * D;
  const T* qb = q + q_start * q_row + h * D;
  T* ob = o + q_start * q_row + h * D;
  const T* kb = k + kv_start * kv_row + kvh * D;
  const T* vb = v + kv_start * kv_row + kvh * D;
  const int S = len_q;
  // The grid covers the longest request the call names (max_seqlen_q); a longer one loops on.
  for (int mt = first_tile; mt * kRows < len_q; mt += m_tiles) {
    const int q0 = mt * kRows;
    // The CTA's queries (zeros past S): the oldest copy group, complete at the first wait.
    for (int idx = threadIdx.x; idx < kRows * CH; idx += kThreads) {
      const int r = idx / CH, c = idx % CH;
      const bool ok = q0 + r < S;
      mma::copy16(mma::smem_address(sq + swizzle<D>(r, c)), qb + (ok ? (q0 + r) * q_row : 0) + c * 8, ok);
    }
    mma::commit();

    // Keys the CTA's rows reach: [lo, hi), as whole tiles from tile_lo.
    const int pos_lo = q0 + shift, pos_hi = min(q0 + kRows, S) - 1 + shift;
    int lo = left >= 0 ? max(pos_lo - left, 0) : 0, hi = len_kv;
    if (causal) hi = min(hi, pos_hi + 1);
    if (right >= 0) hi = min(hi, pos_hi + right + 1);
    const int tile_lo = lo / kTile;
    const int n_tiles = hi > lo ? (hi + kTile - 1) / kTile - tile_lo : 0;
    float ks = 1.f, vs = 1.f;
    if constexpr (PAGED >= kPagedScaled) {
      if (k_scale) ks = *k_scale;
      if (v_scale) vs = *v_scale;
    }
    auto load = [&](int i) {  // the CTA's tile i into stage i % STAGES, zeros past the keys
      T* sk = skv + (i % STAGES) * 2 * TILE;
      for (int idx = threadIdx.x; idx < kTile * CH; idx += kThreads) {
        const int r = idx / CH, c = idx % CH, t = (tile_lo + i) * kTile + r;
        bool ok = t < len_kv;
        const T *kr = kb, *vr = vb;  // the token's K and V rows (this head)
        long long row = ok ? t : 0;
        if constexpr (PAGED != kUnpaged) {
          if (t < n_old) {
            const int page = block_table[static_cast<long long>(b) * pages + t / page_size];
            ok = page >= 0 && page < pool_pages;
            row = ok ? static_cast<long long>(page) * page_size + t % page_size : 0;
            if constexpr (PAGED == kPagedFp8) {  // the raw bytes into the chunk's upper half: scale_cached() widens them
              const long long at = row * kv_row + kvh * D + c * 8;
              const unsigned dst = mma::smem_address(sk + swizzle<D>(r, c) + 4);
              copy8(dst, k_pages + at, ok);
              copy8(dst + TILE * 2, v_pages + at, ok);
              continue;
            } else {
              kr = reinterpret_cast<const T*>(k_pages) + kvh * D, vr = reinterpret_cast<const T*>(v_pages) + kvh * D;
            }
          } else {
            row = ok ? t - n_old : 0;
          }
        }
        const long long off = row * kv_row + c * 8;
        const unsigned dst = mma::smem_address(sk + swizzle<D>(r, c));
        mma::copy16(dst, kr + off, ok);
        mma::copy16(dst + TILE * 2, vr + off, ok);
      }
    };
    // A scaled cache's rows of landed tile i as round_T(cache * scale), in place; each thread takes the
    // chunks it copied (a row outside the pool landed as zeros and stays zeros).
    auto scale_cached = [&](int i) {
      T* sk = skv + (i % STAGES) * 2 * TILE;
      for (int idx = threadIdx.x; idx < kTile * CH; idx += kThreads) {
        const int r = idx / CH, c = idx % CH, t = (tile_lo + i) * kTile + r;
        if (t < n_old) {
          scale_chunk<T, CacheType<T, PAGED>>(sk + swizzle<D>(r, c), ks);
          scale_chunk<T, CacheType<T, PAGED>>(sk + TILE + swizzle<D>(r, c), vs);
        }
      }
    };
#pragma unroll
    for (int i = 0; i < STAGES - 1; ++i) {
      if (i < n_tiles) load(i);
      mma::commit();
    }
    mma::wait<STAGES - 1>();  // the queries landed
    __syncthreads();
    unsigned qf[D / 16][4];  // the warp's 16 rows as A fragments, a k16 step each
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      mma::ldmatrix_x4(qf[kk], mma::smem_address(sq + swizzle<D>(warp * 16 + lane % 16, kk * 2 + lane / 16)));

    const int row0 = q0 + warp * 16 + lane / 4;  // this lane's rows: row0 and row0 + 8
    float m[2] = {neg_inf(), neg_inf()}, l[2] = {0.f, 0.f};
    float acc[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

    for (int i = 0; i < n_tiles; ++i) {
      if (i + STAGES - 1 < n_tiles) load(i + STAGES - 1);
      mma::commit();  // one group an iteration, empty or not: the wait below counts them
      mma::wait<STAGES - 1>();
      __syncthreads();
      if constexpr (PAGED >= kPagedScaled) {
        if ((tile_lo + i) * kTile < n_old) {  // the tile holds cached rows (a CTA-uniform test)
          scale_cached(i);
          __syncthreads();
        }
      }
      const T* sk = skv + (i % STAGES) * 2 * TILE;
      const T* sv = sk + TILE;

      float s[kTile / 8][4];
#pragma unroll
      for (int j = 0; j < kTile / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
        for (int j = 0; j < kTile / 16; ++j) {  // tokens 16j .. 16j + 15: two n8 tiles
          unsigned bk[4];
          mma::ldmatrix_x4(bk, mma::smem_address(sk + swizzle<D>(j * 16 + lane % 8 + lane / 16 * 8, kk * 2 + lane / 8 % 2)));
          mma::mma16816<T>(s[2 * j], qf[kk], bk[0], bk[1]);
          mma::mma16816<T>(s[2 * j + 1], qf[kk], bk[2], bk[3]);
        }

      const int t0 = (tile_lo + i) * kTile;
      // The warp's rows' positions span [wp_lo, wp_lo + 15]: a tile inside every row's keys is unmasked.
      const int wp_lo = q0 + warp * 16 + shift;
      const bool masked = t0 + kTile > len_kv || (causal && t0 + kTile - 1 > wp_lo) ||
                          (right >= 0 && t0 + kTile - 1 > wp_lo + right) || (left >= 0 && t0 < wp_lo + 15 - left);
      float mx[2] = {neg_inf(), neg_inf()};
#pragma unroll
      for (int j = 0; j < kTile / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[j][e] * scale;
          if (softcap > 0.f) x = softcap * tanhf(x / softcap);
          x *= kLog2e;
          if (masked) {
            const int t = t0 + j * 8 + lane % 4 * 2 + e % 2, pos = row0 + e / 2 * 8 + shift;
            if (t >= len_kv || (causal && t > pos) || (left >= 0 && t < pos - left) || (right >= 0 && t > pos + right))
              x = neg_inf();
          }
          s[j][e] = x;
          mx[e / 2] = fmaxf(mx[e / 2], x);
        }
      mma::online_softmax_step(s, mx, m, l, acc);
#pragma unroll
      for (int j = 0; j < kTile / 16; ++j) {
        // S's accumulator layout is P's A-operand layout (k = the tile's tokens 16j .. 16j + 15).
        const unsigned pa[4] = {mma::pack2<T>(s[2 * j][0], s[2 * j][1]), mma::pack2<T>(s[2 * j][2], s[2 * j][3]),
                                mma::pack2<T>(s[2 * j + 1][0], s[2 * j + 1][1]),
                                mma::pack2<T>(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
        for (int n = 0; n < D / 16; ++n) {
          unsigned bv[4];
          mma::ldmatrix_x4_trans(bv, mma::smem_address(sv + swizzle<D>(j * 16 + lane % 8 + lane / 8 % 2 * 8, n * 2 + lane / 16)));
          mma::mma16816<T>(acc[2 * n], pa, bv[0], bv[1]);
          mma::mma16816<T>(acc[2 * n + 1], pa, bv[2], bv[3]);
        }
      }
      __syncthreads();  // the stage is read before the next iteration's copies overwrite it
    }
    mma::wait<0>();

    // Each row's sum over its quad, then O / l as T into the warp's rows of the query tile (only this
    // warp read them), then 16-byte stores of the rows inside S.
    float inv[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      l[hh] += __shfl_xor_sync(0xffffffffu, l[hh], 1);
      l[hh] += __shfl_xor_sync(0xffffffffu, l[hh], 2);
      inv[hh] = l[hh] > 0.f ? 1.f / l[hh] : 0.f;
    }
    T* so = sq + warp * 16 * D;
    const int r = lane / 4, c = lane % 4 * 2;
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int rr = r + hh * 8, col = n * 8 + c;
        *reinterpret_cast<unsigned*>(so + swizzle<D>(rr, col / 8) + col % 8) =
            mma::pack2<T>(acc[n][2 * hh] * inv[hh], acc[n][2 * hh + 1] * inv[hh]);
      }
    __syncwarp();
#pragma unroll
    for (int idx = lane; idx < 16 * CH; idx += 32) {
      const int rr = idx / CH, cc = idx % CH, row = q0 + warp * 16 + rr;
      if (row < S)
        *reinterpret_cast<uint4*>(ob + row * q_row + cc * 8) = *reinterpret_cast<const uint4*>(so + swizzle<D>(rr, cc));
    }
    __syncthreads();  // every warp stored its rows before the next tile's queries land in sq
  }
}

// The new tokens' keys and values into a paged cache (PAGED calls, after the attention read the cache
// as it was): row i of request b (rows cu[b] .. cu[b + 1] of k and v, clamped to rows_q) goes to
// logical position cache_seqlens[b] + i, pool row block_table[b, p / page_size] * page_size +
// p % page_size, as it is (kPagedDirect) or as x / scale in float32 rounded to the cache's dtype
// (float8_e4m3fn: clamped to [-448, 448] first); a position past pages * page_size or a page outside
// the pool is not written. A CTA a row of k and v ([rows_q, kv_heads, D]), its request found by
// bisecting cu.
template <typename T, int D, int PAGED>
__global__ void __launch_bounds__(prefill::kThreads)
    attention_paged_append(const T* __restrict__ k, const T* __restrict__ v,
                           prefill::CacheType<T, PAGED>* __restrict__ k_pages,
                           prefill::CacheType<T, PAGED>* __restrict__ v_pages, const int* __restrict__ cu_q,
                           const int* __restrict__ cache_seqlens, const int* __restrict__ block_table, int batch,
                           int rows_q, int kv_heads, int pages, int page_size, int pool_pages,
                           const float* __restrict__ k_scale, const float* __restrict__ v_scale) {
  using namespace prefill;
  using C = CacheType<T, PAGED>;
  const int r = static_cast<int>(blockIdx.x);
  if (r >= rows_q || batch <= 0) return;
  int lo = 0, hi = batch;  // the last request whose first row is <= r
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (min(max(cu_q[mid], 0), rows_q) <= r) lo = mid; else hi = mid;
  }
  const int first = min(max(cu_q[lo], 0), rows_q), end = min(max(cu_q[lo + 1], first), rows_q);
  if (r < first || r >= end) return;  // a row of no request
  const long long p = static_cast<long long>(max(cache_seqlens[lo], 0)) + (r - first);
  if (p >= static_cast<long long>(pages) * page_size) return;
  const int page = block_table[static_cast<long long>(lo) * pages + p / page_size];
  if (page < 0 || page >= pool_pages) return;
  const long long row_elems = static_cast<long long>(kv_heads) * D;
  const long long dst = (static_cast<long long>(page) * page_size + p % page_size) * row_elems;
  const long long src = static_cast<long long>(r) * row_elems;
  const float ks = PAGED >= kPagedScaled && k_scale ? *k_scale : 1.f;
  const float vs = PAGED >= kPagedScaled && v_scale ? *v_scale : 1.f;
  for (long long c = threadIdx.x; c < row_elems / 8; c += kThreads) {
    if constexpr (PAGED == kPagedDirect) {
      *reinterpret_cast<uint4*>(k_pages + dst + c * 8) = *reinterpret_cast<const uint4*>(k + src + c * 8);
      *reinterpret_cast<uint4*>(v_pages + dst + c * 8) = *reinterpret_cast<const uint4*>(v + src + c * 8);
    } else {
      const T* x[2] = {k + src + c * 8, v + src + c * 8};
      C* y[2] = {k_pages + dst + c * 8, v_pages + dst + c * 8};
      const float s[2] = {ks, vs};
#pragma unroll
      for (int kv = 0; kv < 2; ++kv) {
        alignas(16) T in[8];
        alignas(16) C out[8];
        *reinterpret_cast<uint4*>(in) = *reinterpret_cast<const uint4*>(x[kv]);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float f = __fdiv_rn(to_float(in[e]), s[kv]);
          if constexpr (PAGED == kPagedFp8) out[e] = fp8_e4m3{to_e4m3_sat(f)};
          else out[e] = from_float<T>(f);
        }
        if constexpr (PAGED == kPagedFp8) *reinterpret_cast<uint2*>(y[kv]) = *reinterpret_cast<const uint2*>(out);
        else *reinterpret_cast<uint4*>(y[kv]) = *reinterpret_cast<const uint4*>(out);
      }
    }
  }
}

// Neox RoPE of a paged call's new rows at their positions cache_seqlens[b] + i, as
// RopeNeoxPositionIdsFwdOp computes it: f_j = 1 / base^(j / half) and angle p * f_j in float32, cos and
// sin rounded to T, then the first `rot` dims of each head rotated in float32 (no fused multiply-add,
// as ATen's separate products round) and rounded once; the rest copied. q [rows_q, heads, D] into
// q_rot, k [rows_q, kv_heads, D] into k_rot; a row of no request is copied as it is. A CTA a row.
template <typename T, int D>
__global__ void __launch_bounds__(prefill::kThreads)
    attention_paged_rope(const T* __restrict__ q, const T* __restrict__ k, T* __restrict__ q_rot,
                         T* __restrict__ k_rot, const int* __restrict__ cu_q, const int* __restrict__ cache_seqlens,
                         int batch, int rows_q, int heads, int kv_heads, int rot, float base) {
  __shared__ float table[D];  // cos_j at j, sin_j at half + j
  const int r = static_cast<int>(blockIdx.x);
  if (r >= rows_q) return;
  int lo = 0, hi = max(batch, 1);
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (min(max(cu_q[mid], 0), rows_q) <= r) lo = mid; else hi = mid;
  }
  const int first = batch > 0 ? min(max(cu_q[lo], 0), rows_q) : 0;
  const int end = batch > 0 ? min(max(cu_q[lo + 1], first), rows_q) : 0;
  const int half = r >= first && r < end ? rot / 2 : 0;  // a row of no request: copied
  const float pos = static_cast<float>(batch > 0 ? max(cache_seqlens[lo], 0) + (r - first) : 0);
  for (int j = threadIdx.x; j < half; j += prefill::kThreads) {
    const float f = __frcp_rn(powf(base, __fdiv_rn(static_cast<float>(j), static_cast<float>(half))));
    const float angle = __fmul_rn(pos, f);
    table[j] = to_float(from_float<T>(cosf(angle)));
    table[half + j] = to_float(from_float<T>(sinf(angle)));
  }
  __syncthreads();
  const int n = (heads + kv_heads) * D;
  for (int idx = threadIdx.x; idx < n; idx += prefill::kThreads) {
    const int hd = idx / D, d = idx % D;
    const bool is_q = hd < heads;
    const T* x = is_q ? q + (static_cast<long long>(r) * heads + hd) * D : k + (static_cast<long long>(r) * kv_heads + hd - heads) * D;
    T* y = is_q ? q_rot + (static_cast<long long>(r) * heads + hd) * D : k_rot + (static_cast<long long>(r) * kv_heads + hd - heads) * D;
    if (d >= 2 * half) {
      y[d] = x[d];
    } else {
      const int j = d % half;
      const float x1 = to_float(x[j]), x2 = to_float(x[j + half]), c = table[j], s = table[half + j];
      y[d] = from_float<T>(d < half ? __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s))
                                    : __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
    }
  }
}

}  // namespace tileops

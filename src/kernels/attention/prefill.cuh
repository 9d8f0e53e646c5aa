// Attention forward over whole sequences on tensor cores, f16/bf16, head dim D of 64 or 128:
// o = softmax(q k^T * scale) v per request and query head, query head h reading KV head h / (H / H_kv).
// Requests are fixed-length ([B, S, heads, D]: request b's token t is row b * S + t) or packed
// (VARLEN: rows cu[b] .. cu[b + 1] of [total, heads, D], the offsets read on the device and clamped to
// the tensors' rows). Query i of a request sits at key position i + len_kv - len_q and attends key j
// when j <= that position (causal), j >= position - left (left >= 0) and j <= position + right
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
#include "common/mma.cuh"

namespace tileops {
namespace prefill {

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kRows = 64;  // query rows a CTA: 16 a warp
constexpr int kTile = 64;  // tokens a K/V tile
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// Element offset of 16-byte chunk c of row r in a tile of D-element rows.
template <int D>
__device__ __forceinline__ int swizzle(int r, int c) {
  return r * D + ((c ^ (r & 7)) << 3);
}

}  // namespace prefill

template <typename T, int D, int STAGES, bool VARLEN>
__global__ void __launch_bounds__(prefill::kThreads)
    attention_prefill_fwd(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          T* __restrict__ o, const int* __restrict__ cu_q, const int* __restrict__ cu_kv,
                          int rows_q, int rows_kv, int heads, int kv_heads, int bh, int m_tiles, float scale,
                          float softcap, int causal, int left, int right) {
  using namespace prefill;
  static_assert(D == 64 || D == 128, "D: 64 or 128 (the queries' and the output's fragments in registers)");
  static_assert(sizeof(T) == 2, "f16 or bf16");
  static_assert(STAGES >= 2, "a tile in flight while one is read");
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
  int len_q, len_kv;
  if constexpr (VARLEN) {
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
    auto load = [&](int i) {  // the CTA's tile i into stage i % STAGES, zeros past the keys
      T* sk = skv + (i % STAGES) * 2 * TILE;
      for (int idx = threadIdx.x; idx < kTile * CH; idx += kThreads) {
        const int r = idx / CH, c = idx % CH, t = (tile_lo + i) * kTile + r;
        const bool ok = t < len_kv;
        const long long off = (ok ? t : 0) * kv_row + c * 8;
        const unsigned dst = mma::smem_address(sk + swizzle<D>(r, c));
        mma::copy16(dst, kb + off, ok);
        mma::copy16(dst + TILE * 2, vb + off, ok);
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

}  // namespace tileops

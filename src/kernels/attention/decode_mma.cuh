// Decode attention on tensor cores (f16/bf16, head dim D a multiple of 64 up to 256): the same
// problem, splits and outputs as decode_fwd (decode.cuh, whose decode_merge combines the splits),
// with the query rows of a KV head as one 16-row MMA tile.
//
// A CTA takes one KV head of one request, 16 of its query rows (zeros past the group) and one split
// of its tokens. Each of its kMmaWarps warps streams its own 16-token tiles of K and V (tiles
// warp, warp + kMmaWarps, ...) through a STAGES-deep cp.async pipeline in shared memory, and
// keeps its own online softmax (float32, base 2): S = Q K^T and O += P V are m16n8k16 MMAs, P
// rounded to T as FlashAttention does. The warps' states are combined in shared memory at the end.
// Rows of a tile in shared memory are D elements; 16-byte chunk c of row r is stored at chunk
// c ^ (r % 8), so the 8 rows an ldmatrix reads fall in distinct banks. Tokens past the split, and a
// paged cache's pages outside the pool, are read as zeros and masked out of the softmax.
// Host side: src/targets/nvrtc/attention/decode.cpp.
#pragma once
#include "attention/decode.cuh"
#include "attention/mma_softmax.cuh"
#include "common/mma.cuh"

namespace tileops {

constexpr int kMmaWarps = 4;
constexpr int kMmaRows = 16;   // query rows a CTA: the MMA's M
constexpr int kMmaTile = 16;   // tokens a warp's tile

// Element offset of 16-byte chunk c of row r in a tile of D-element rows.
template <int D>
__device__ __forceinline__ int decode_swizzle(int r, int c) {
  return r * D + ((c ^ (r & 7)) << 3);
}

template <typename T, int D, int STAGES, bool PAGED>
__global__ void __launch_bounds__(kMmaWarps * 32, 1)  // min 1 CTA an SM: without it ptxas capped D = 64 at 96 registers and spilled
decode_mma_fwd(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o,
               float* __restrict__ part_o, float* __restrict__ part_lse, const int* __restrict__ lengths,
               const int* __restrict__ block_table, long long q_sb, long long q_sh, long long q_sg, long long o_sb,
               long long o_sh, long long o_sg, long long kv_sb, long long kv_st, long long kv_sh, int dim, int n_kv,
               int page_size, int pages, int pool_pages, int kv_heads, int group, int g_tiles, int splits,
               long long rows, float scale, float softcap) {
  static_assert(D % 64 == 0 && D <= 256, "D: a multiple of 64 (8 chunks a row for the swizzle), at most 256");
  static_assert(sizeof(T) == 2, "f16 or bf16");
  static_assert(STAGES >= 2, "a tile in flight while one is read");
  constexpr int CH = D / 8;                // 16-byte chunks a row
  constexpr int TILE = kMmaTile * D;       // elements of one K (or V) tile
  constexpr int NT = D / 8;                // n8 tiles of the output
  extern __shared__ __align__(16) unsigned char decode_smem[];
  T* sq = reinterpret_cast<T*>(decode_smem);  // [kMmaRows][D]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  T* wkv = sq + kMmaRows * D + warp * STAGES * 2 * TILE;  // this warp's stages: [stage][K | V][tile]

  int bid = static_cast<int>(blockIdx.x);
  const int split = bid % splits;
  bid /= splits;
  const int gt = bid % g_tiles;
  bid /= g_tiles;
  const int kvh = bid % kv_heads;
  const long long b = bid / kv_heads;
  const int g0 = gt * kMmaRows;

  int len = n_kv;
  if (lengths != nullptr) len = min(max(lengths[b], 0), n_kv);
  // Splits in whole rounds of the CTA's tiles, so that its warps share a split evenly.
  constexpr int kRound = kMmaWarps * kMmaTile;
  const int chunk = ((len + splits - 1) / splits + kRound - 1) / kRound * kRound;
  const int t0 = min(len, split * chunk), t1 = min(len, t0 + chunk);

  const T* kb = k + b * kv_sb + kvh * kv_sh;
  const T* vb = v + b * kv_sb + kvh * kv_sh;
  // Row of token t in the cache, or -1 past the split or on a page outside the pool.
  auto token_row = [&](int t) -> long long {
    if (t >= t1) return -1;
    if constexpr (PAGED) {
      const int page = block_table[b * pages + t / page_size];
      if (page < 0 || page >= pool_pages) return -1;
      return static_cast<long long>(page) * page_size + t % page_size;
    }
    return t;
  };

  // The rows' queries; the copies' group is the oldest, complete at the pipeline's first wait.
  for (int idx = threadIdx.x; idx < kMmaRows * CH; idx += kMmaWarps * 32) {
    const int r = idx / CH, c = idx % CH;
    const bool ok = g0 + r < group;
    const T* src = q + b * q_sb + kvh * q_sh + static_cast<long long>(ok ? g0 + r : 0) * q_sg + c * 8;
    mma::copy16(mma::smem_address(sq + decode_swizzle<D>(r, c)), src, ok);
  }
  mma::commit();

  const int n_tiles = (t1 - t0 + kMmaTile - 1) / kMmaTile;
  const int mine = n_tiles > warp ? (n_tiles - warp + kMmaWarps - 1) / kMmaWarps : 0;
  auto tile_start = [&](int i) { return t0 + (warp + i * kMmaWarps) * kMmaTile; };
  // Copies the warp's i-th tile into stage i % STAGES; returns its tokens' validity (bit r: token
  // r of the tile is read). Every row is looked up before the first copy is issued: the copies'
  // asm would otherwise order each block-table read after the copies before it.
  constexpr int J = kMmaTile * CH / 32;  // chunks a lane copies of K (and of V)
  auto load = [&](int i) -> unsigned {
    T* sk = wkv + (i % STAGES) * 2 * TILE;
    const int tt = tile_start(i);
    long long row[J];
#pragma unroll
    for (int j = 0; j < J; ++j) row[j] = token_row(tt + (j * 32 + lane) / CH);
    unsigned valid = 0;
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int idx = j * 32 + lane, r = idx / CH, c = idx % CH;
      const long long off = (row[j] < 0 ? 0 : row[j]) * kv_st + c * 8;
      const unsigned dst = mma::smem_address(sk + decode_swizzle<D>(r, c));
      mma::copy16(dst, kb + off, row[j] >= 0);
      mma::copy16(dst + TILE * 2, vb + off, row[j] >= 0);
      const unsigned lanes_ok = __ballot_sync(0xffffffffu, row[j] >= 0);
#pragma unroll
      for (int x = 0; x < 32 / CH; ++x) valid |= (lanes_ok >> (x * CH) & 1u) << (j * 32 / CH + x);
    }
    return valid;
  };
  unsigned valid[STAGES];  // of the tiles in the stages, oldest first (unrolled: registers)
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) {
    valid[i] = i < mine ? load(i) : 0u;
    mma::commit();
  }
  mma::wait<STAGES - 1>();
  __syncthreads();  // every thread's query chunks landed

  const float q_mul = softcap > 0.f ? scale : scale * kDecodeLog2e;
  float m[2] = {decode_neg_inf(), decode_neg_inf()}, l[2] = {0.f, 0.f};  // rows lane / 4 and lane / 4 + 8
  float acc[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

  for (int i = 0; i < mine; ++i) {
    valid[STAGES - 1] = i + STAGES - 1 < mine ? load(i + STAGES - 1) : 0u;
    mma::commit();  // one group an iteration, empty or not: the wait below counts them
    mma::wait<STAGES - 1>();
    __syncwarp();
    const T* sk = wkv + (i % STAGES) * 2 * TILE;
    const T* sv = sk + TILE;

    float s[2][4] = {};  // tokens 0-7 and 8-15 of the tile
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      unsigned a[4], bk[4];
      mma::ldmatrix_x4(a, mma::smem_address(sq + decode_swizzle<D>(lane % 16, kk * 2 + lane / 16)));
      mma::ldmatrix_x4(bk, mma::smem_address(sk + decode_swizzle<D>(lane % 8 + lane / 16 * 8, kk * 2 + lane / 8 % 2)));
      mma::mma16816<T>(s[0], a, bk[0], bk[1]);
      mma::mma16816<T>(s[1], a, bk[2], bk[3]);
    }

    float mx[2] = {decode_neg_inf(), decode_neg_inf()};
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[j][e] * q_mul;
        if (softcap > 0.f) x = softcap * tanhf(x / softcap) * kDecodeLog2e;
        if (!(valid[0] >> (j * 8 + lane % 4 * 2 + e % 2) & 1u)) x = decode_neg_inf();
        s[j][e] = x;
        mx[e / 2] = fmaxf(mx[e / 2], x);
      }
    mma::online_softmax_step(s, mx, m, l, acc);
    // S's accumulator layout is P's A-operand layout (k = the tile's tokens).
    const unsigned pa[4] = {mma::pack2<T>(s[0][0], s[0][1]), mma::pack2<T>(s[0][2], s[0][3]),
                            mma::pack2<T>(s[1][0], s[1][1]), mma::pack2<T>(s[1][2], s[1][3])};
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      unsigned bv[4];
      mma::ldmatrix_x4_trans(bv, mma::smem_address(sv + decode_swizzle<D>(lane % 8 + lane / 8 % 2 * 8, n * 2 + lane / 16)));
      mma::mma16816<T>(acc[2 * n], pa, bv[0], bv[1]);
      mma::mma16816<T>(acc[2 * n + 1], pa, bv[2], bv[3]);
    }
#pragma unroll
    for (int x = 0; x + 1 < STAGES; ++x) valid[x] = valid[x + 1];
    __syncwarp();  // the stage is read before the next iteration's copies overwrite it
  }

  allow_dependent_launch();  // decode_merge may be scheduled as this grid's CTAs finish
  // The warps' states through shared memory (the pipeline's, now idle): acc, m and l per row.
  mma::wait<0>();
  __syncthreads();
  float* co = reinterpret_cast<float*>(decode_smem);  // [warp][row][D]
  float* cm = co + kMmaWarps * kMmaRows * D;          // [warp][row]
  float* cl = cm + kMmaWarps * kMmaRows;
  const int r = lane / 4, c = lane % 4 * 2;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    float* orow = co + (warp * kMmaRows + r + 8 * h) * D + c;
#pragma unroll
    for (int n = 0; n < NT; ++n) orow[n * 8] = acc[n][2 * h], orow[n * 8 + 1] = acc[n][2 * h + 1];
    if (lane % 4 == 0) cm[warp * kMmaRows + r + 8 * h] = m[h], cl[warp * kMmaRows + r + 8 * h] = l[h];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kMmaRows * D; idx += kMmaWarps * 32) {
    const int row = idx / D, d = idx % D;
    if (g0 + row >= group) break;  // rows ascend with idx
    float mx = decode_neg_inf();
#pragma unroll
    for (int w = 0; w < kMmaWarps; ++w) mx = fmaxf(mx, cm[w * kMmaRows + row]);
    float num = 0.f, den = 0.f;
    if (mx != decode_neg_inf()) {
#pragma unroll
      for (int w = 0; w < kMmaWarps; ++w) {
        const float wt = exp2f(cm[w * kMmaRows + row] - mx);
        num += wt * co[(w * kMmaRows + row) * D + d];
        den += wt * cl[w * kMmaRows + row];
      }
    }
    const float val = den > 0.f ? num / den : 0.f;  // no token: zeros
    const long long row_id = (b * kv_heads + kvh) * group + g0 + row;
    if (part_o == nullptr) {
      o[b * o_sb + kvh * o_sh + static_cast<long long>(g0 + row) * o_sg + d] = from_float<T>(val);
    } else {
      part_o[(static_cast<long long>(split) * rows + row_id) * D + d] = val;
      if (d == 0) part_lse[static_cast<long long>(split) * rows + row_id] = den > 0.f ? mx + log2f(den) : decode_neg_inf();
    }
  }
}

}  // namespace tileops

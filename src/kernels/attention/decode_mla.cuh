// Multi-head latent attention decode on tensor cores (DeepSeek's absorbed MLA: one latent KV head
// shared by every query head; f16/bf16): s = (q . k + q_pe . k_pe) * scale over the cached tokens,
// softmax in float32, o = softmax . k (the latent is also the value). The splits and their merge are
// decode_mma_fwd's (decode_merge in decode.cuh), with the heads as a KV head's query rows.
//
// A CTA takes 16 query heads of one request and one split of its tokens; each of its kMmaWarps warps
// streams its own 16-token tiles (tiles warp, warp + kMmaWarps, ...) through a STAGES-deep cp.async
// pipeline. A tile row is the token's D latent values followed by its PE rope values (DK = D + PE,
// copied from k and k_pe); S = [q, q_pe] . row is one MMA over DK, and P V reads the same tile's
// first D columns as V, so the latent is read from memory once. Rows use decode_mma_fwd's swizzle
// (DK a multiple of 64). Tokens past the split are zeros, masked out of the softmax.
// Host side: src/targets/nvrtc/attention/mla_decode.cpp.
#pragma once
#include "attention/decode_mma.cuh"

namespace tileops {

template <typename T, int D, int PE, int STAGES>
__global__ void __launch_bounds__(kMmaWarps * 32, 1)
mla_decode_fwd(const T* __restrict__ q, const T* __restrict__ q_pe, const T* __restrict__ k,
               const T* __restrict__ k_pe, T* __restrict__ o, float* __restrict__ part_o,
               float* __restrict__ part_lse, int heads, int n_kv, int g_tiles, int splits, long long rows,
               float scale) {
  constexpr int DK = D + PE;
  static_assert(DK % 64 == 0, "D + PE: a multiple of 64 (8 chunks a row for the swizzle)");
  static_assert(D % 16 == 0 && D <= 256 && PE % 8 == 0, "D: 16-column V tiles, at most 256; PE: whole chunks");
  static_assert(sizeof(T) == 2, "f16 or bf16");
  static_assert(STAGES >= 2, "a tile in flight while one is read");
  constexpr int CH = DK / 8;            // 16-byte chunks a row
  constexpr int CD = D / 8;             // of them from k; the rest from k_pe
  constexpr int TILE = kMmaTile * DK;   // elements of one tile
  constexpr int NT = D / 8;             // n8 tiles of the output
  extern __shared__ __align__(16) unsigned char decode_smem[];
  T* sq = reinterpret_cast<T*>(decode_smem);  // [kMmaRows][DK]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  T* wk = sq + kMmaRows * DK + warp * STAGES * TILE;  // this warp's stages

  int bid = static_cast<int>(blockIdx.x);
  const int split = bid % splits;
  bid /= splits;
  const int gt = bid % g_tiles;
  const long long b = bid / g_tiles;
  const int g0 = gt * kMmaRows;

  constexpr int kRound = kMmaWarps * kMmaTile;  // splits in whole rounds of the CTA's tiles
  const int chunk = ((n_kv + splits - 1) / splits + kRound - 1) / kRound * kRound;
  const int t0 = min(n_kv, split * chunk), t1 = min(n_kv, t0 + chunk);
  const T* kb = k + b * n_kv * D;
  const T* pb = k_pe + b * n_kv * PE;

  for (int idx = threadIdx.x; idx < kMmaRows * CH; idx += kMmaWarps * 32) {
    const int r = idx / CH, c = idx % CH;
    const bool ok = g0 + r < heads;
    const long long row = b * heads + (ok ? g0 + r : 0);
    const T* src = c < CD ? q + row * D + c * 8 : q_pe + row * PE + (c - CD) * 8;
    mma::copy16(mma::smem_address(sq + decode_swizzle<DK>(r, c)), src, ok);
  }
  mma::commit();

  const int n_tiles = (t1 - t0 + kMmaTile - 1) / kMmaTile;
  const int mine = n_tiles > warp ? (n_tiles - warp + kMmaWarps - 1) / kMmaWarps : 0;
  auto tile_start = [&](int i) { return t0 + (warp + i * kMmaWarps) * kMmaTile; };
  constexpr int J = kMmaTile * CH / 32;  // chunks a lane copies of a tile
  auto load = [&](int i) {
    T* sk = wk + (i % STAGES) * TILE;
    const int tt = tile_start(i);
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int idx = j * 32 + lane, r = idx / CH, c = idx % CH;
      const bool ok = tt + r < t1;
      const long long t = ok ? tt + r : 0;
      const T* src = c < CD ? kb + t * D + c * 8 : pb + t * PE + (c - CD) * 8;
      mma::copy16(mma::smem_address(sk + decode_swizzle<DK>(r, c)), src, ok);
    }
  };
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) {
    if (i < mine) load(i);
    mma::commit();
  }
  mma::wait<STAGES - 1>();
  __syncthreads();  // every thread's query chunks landed

  const float q_mul = scale * kDecodeLog2e;
  float m[2] = {decode_neg_inf(), decode_neg_inf()}, l[2] = {0.f, 0.f};  // rows lane / 4 and lane / 4 + 8
  float acc[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

  for (int i = 0; i < mine; ++i) {
    if (i + STAGES - 1 < mine) load(i + STAGES - 1);
    mma::commit();  // one group an iteration, empty or not: the wait below counts them
    mma::wait<STAGES - 1>();
    __syncwarp();
    const T* sk = wk + (i % STAGES) * TILE;
    const int tt = tile_start(i);

    float s[2][4] = {};  // tokens 0-7 and 8-15 of the tile
#pragma unroll
    for (int kk = 0; kk < DK / 16; ++kk) {
      unsigned a[4], bk[4];
      mma::ldmatrix_x4(a, mma::smem_address(sq + decode_swizzle<DK>(lane % 16, kk * 2 + lane / 16)));
      mma::ldmatrix_x4(bk, mma::smem_address(sk + decode_swizzle<DK>(lane % 8 + lane / 16 * 8, kk * 2 + lane / 8 % 2)));
      mma::mma16816<T>(s[0], a, bk[0], bk[1]);
      mma::mma16816<T>(s[1], a, bk[2], bk[3]);
    }

    float mx[2] = {decode_neg_inf(), decode_neg_inf()};
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool in = tt + j * 8 + lane % 4 * 2 + e % 2 < t1;  // C column: the tile's token
        const float x = in ? s[j][e] * q_mul : decode_neg_inf();
        s[j][e] = x;
        mx[e / 2] = fmaxf(mx[e / 2], x);
      }
    float base[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // the row's maximum over the quad holding it
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      const float mn = fmaxf(m[h], mx[h]);
      base[h] = mn == decode_neg_inf() ? 0.f : mn;
      const float c = exp2f(m[h] - base[h]);
      l[h] *= c;
#pragma unroll
      for (int n = 0; n < NT; ++n) acc[n][2 * h] *= c, acc[n][2 * h + 1] *= c;
      m[h] = mn;
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = exp2f(s[j][e] - base[e / 2]);
        l[e / 2] += s[j][e];
      }
    const unsigned pa[4] = {mma::pack2<T>(s[0][0], s[0][1]), mma::pack2<T>(s[0][2], s[0][3]),
                            mma::pack2<T>(s[1][0], s[1][1]), mma::pack2<T>(s[1][2], s[1][3])};
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {  // V: the tile's first D columns
      unsigned bv[4];
      mma::ldmatrix_x4_trans(bv, mma::smem_address(sk + decode_swizzle<DK>(lane % 8 + lane / 8 % 2 * 8, n * 2 + lane / 16)));
      mma::mma16816<T>(acc[2 * n], pa, bv[0], bv[1]);
      mma::mma16816<T>(acc[2 * n + 1], pa, bv[2], bv[3]);
    }
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
    if (g0 + row >= heads) break;  // rows ascend with idx
    float mxw = decode_neg_inf();
#pragma unroll
    for (int w = 0; w < kMmaWarps; ++w) mxw = fmaxf(mxw, cm[w * kMmaRows + row]);
    float num = 0.f, den = 0.f;
    if (mxw != decode_neg_inf()) {
#pragma unroll
      for (int w = 0; w < kMmaWarps; ++w) {
        const float wt = exp2f(cm[w * kMmaRows + row] - mxw);
        num += wt * co[(w * kMmaRows + row) * D + d];
        den += wt * cl[w * kMmaRows + row];
      }
    }
    const float val = den > 0.f ? num / den : 0.f;  // no token: zeros
    const long long row_id = b * heads + g0 + row;
    if (part_o == nullptr) {
      o[row_id * D + d] = from_float<T>(val);
    } else {
      part_o[(static_cast<long long>(split) * rows + row_id) * D + d] = val;
      if (d == 0) part_lse[static_cast<long long>(split) * rows + row_id] = den > 0.f ? mxw + log2f(den) : decode_neg_inf();
    }
  }
}

}  // namespace tileops

// MoeGroupedGemmNopadFwdOp (ACT = kNoAct) and MoeGateUpFwdOp (ACT = kActSilu or kActGelu) in one
// launch, the expert runs read on the device: c[run e] = a[run e] @ b[e]^T, or act(gate) * up of it
// for gate-up (b[e]'s rows: N gate rows then N up rows), with float32 sums, the activation in float32,
// one rounding to T; rows no run covers are zeros (manifests/moe.yaml). No host read, so a call can be
// captured in a CUDA graph.
//
// The grid is a bound on the tiles, not their count: slot s of (ceil(numel / 64) + E) row tiles times
// (n_tiles + 1) columns. Each CTA scans true_sizes into the running count of 64-row tiles an expert
// and takes the tile its slot names (slots past the last tile exit). The last column zeroes the rows of
// row tile s that no run covers. A tile is 64 x 128 of a @ b^T with 8 warps, 32 x 32 each, over 64-wide
// steps of K (128 bytes of both operands, K-major) in a STAGES-deep cp.async pipeline, 16-byte chunk
// c of row r stored at c ^ (r % 8) so that ldmatrix reads 8 rows from 8 banks (fp8_gemm.cuh's layout).
// Gate-up's 128 rows of b are 64 output columns: groups of 8 gate rows and the same columns' 8 up
// rows alternate, so a thread holds the gate and the up sum of each of its outputs (n8 tiles 2j, 2j+1).
// Runs are taken as given: rows outside a's are skipped, and rows two runs share are written twice
// (the host-checked targets refuse both).
// Host side: K % 8 == 0, 16-byte aligned a and b, contiguous tensors, E <= kMaxExperts.
#pragma once
#include "activation/act.cuh"
#include "common/dtypes.cuh"
#include "common/mma.cuh"
#include "common/op_ids.cuh"

namespace tileops {
namespace moe_gemm {

constexpr int kBM = 64, kBN = 128, kBK = 64, kWarps = 8, kThreads = kWarps * 32;
constexpr int kMaxExperts = 4 * kThreads;  // four a thread in the scan
constexpr int kNoAct = -1;                 // the plain grouped GEMM

// Byte offset of 16-byte chunk c of row r in a tile of 128-byte rows.
__device__ __forceinline__ int swizzle(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

// tile_end[e]: 64-row tiles of experts 0..e (an inclusive scan, four experts a thread).
__device__ __forceinline__ void scan_tiles(const int* __restrict__ sizes, int E, int* tile_end) {
  __shared__ int warp_total[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int mine[4], sum = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int e = threadIdx.x * 4 + j;
    const int rows = e < E ? max(sizes[e], 0) : 0;
    sum += (rows + kBM - 1) / kBM;
    mine[j] = sum;
  }
  int x = sum;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, off);
    if (lane >= off) x += y;
  }
  if (lane == 31) warp_total[warp] = x;
  __syncthreads();
  int before = x - sum;
  for (int w = 0; w < warp; ++w) before += warp_total[w];
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (threadIdx.x * 4 + j < E) tile_end[threadIdx.x * 4 + j] = before + mine[j];
  __syncthreads();
}

}  // namespace moe_gemm

template <typename T, int STAGES, int ACT>
__global__ void __launch_bounds__(moe_gemm::kThreads, 1)
    moe_grouped_gemm_fwd(const T* __restrict__ a, const T* __restrict__ b, const int* __restrict__ sizes,
                         const int* __restrict__ offsets, T* __restrict__ c, int numel, int N, int K, int E,
                         int n_tiles) {
  using namespace moe_gemm;
  static_assert(STAGES >= 2, "a step in flight while one is read");
  static_assert(ACT == kNoAct || ACT == kActSilu || ACT == kActGelu, "gate-up takes SiLU or the erf GELU");
  constexpr bool kGated = ACT != kNoAct;
  constexpr int OUT_COLS = kGated ? kBN / 2 : kBN;  // c's columns a tile
  constexpr int MT = 2, NT = 4;  // m16 tiles (32 rows) and n8 tiles (32 columns) a warp
  constexpr int A_BYTES = kBM * 128, B_BYTES = kBN * 128;
  extern __shared__ __align__(128) unsigned char moe_smem[];
  __shared__ int tile_end[kMaxExperts];
  const int slot = static_cast<int>(blockIdx.x) / (n_tiles + 1), col = static_cast<int>(blockIdx.x) % (n_tiles + 1);

  if (col == n_tiles) {  // zero the uncovered rows of row tile `slot`: 4 lanes a row, 64 rows
    const int r = slot * kBM + static_cast<int>(threadIdx.x) / 4;
    bool covered = false;
    if (r < numel)
      for (int e = threadIdx.x % 4; e < E; e += 4) covered |= offsets[e] <= r && r < offsets[e] + max(sizes[e], 0);
    covered |= __shfl_xor_sync(0xffffffffu, covered, 1);
    covered |= __shfl_xor_sync(0xffffffffu, covered, 2);
    if (r < numel && !covered)
      for (int n = threadIdx.x % 4; n < N; n += 4) c[static_cast<long long>(r) * N + n] = from_float<T>(0.f);
    return;
  }

  scan_tiles(sizes, E, tile_end);
  if (E == 0 || slot >= tile_end[E - 1]) return;  // past the last tile
  int lo = 0, hi = E - 1;  // the first expert whose tiles end past the slot
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (tile_end[mid] > slot) hi = mid;
    else lo = mid + 1;
  }
  const int e = lo;
  const int first_tile = e == 0 ? 0 : tile_end[e - 1];
  const int run0 = offsets[e], run_end = run0 + sizes[e];
  const int m0 = run0 + (slot - first_tile) * kBM, n0 = col * OUT_COLS;
  const T* be = b + static_cast<long long>(e) * (kGated ? 2 : 1) * N * K;
  const int steps = (K + kBK - 1) / kBK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 4, wn = warp % 4;
  auto row_ok = [&](int m) { return m < run_end && m >= 0 && m < numel; };
  // Tile row r of b: c's column n0 + r (or, gated, the gate or up row of column n0 + (r / 16) * 8 + r % 8).
  auto out_col = [&](int r) { return kGated ? n0 + (r / 16) * 8 + r % 8 : n0 + r; };
  auto b_row = [&](int r) { return kGated && (r / 8) % 2 ? N + out_col(r) : out_col(r); };

  // Stage of step ks: a's 64 rows then b's 128, 128 bytes (64 values of K) each; zeros outside.
  auto load = [&](int ks) {
    unsigned char* sa = moe_smem + (ks % STAGES) * (A_BYTES + B_BYTES);
    unsigned char* sb = sa + A_BYTES;
    const int k0 = ks * kBK;
#pragma unroll
    for (int i = threadIdx.x; i < kBM * 8; i += kThreads) {
      const int r = i / 8, ch = i % 8;
      const bool ok = row_ok(m0 + r) && k0 + ch * 8 < K;
      const T* src = a + (ok ? static_cast<long long>(m0 + r) * K + k0 + ch * 8 : 0);
      mma::copy16(mma::smem_address(sa + swizzle(r, ch)), src, ok);
    }
#pragma unroll
    for (int i = threadIdx.x; i < kBN * 8; i += kThreads) {
      const int r = i / 8, ch = i % 8;
      const bool ok = out_col(r) < N && k0 + ch * 8 < K;
      const T* src = be + (ok ? static_cast<long long>(b_row(r)) * K + k0 + ch * 8 : 0);
      mma::copy16(mma::smem_address(sb + swizzle(r, ch)), src, ok);
    }
  };

  float acc[MT][NT][4] = {};
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < steps) load(s);
    mma::commit();
  }
  for (int ks = 0; ks < steps; ++ks) {
    if (ks + STAGES - 1 < steps) load(ks + STAGES - 1);
    mma::commit();  // one group a step, empty or not: the wait below counts them
    mma::wait<STAGES - 1>();
    __syncthreads();
    const unsigned char* sa = moe_smem + (ks % STAGES) * (A_BYTES + B_BYTES);
    const unsigned char* sb = sa + A_BYTES;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {  // 16 values of K: chunks 2 kk, 2 kk + 1
      unsigned bf[NT][2];
#pragma unroll
      for (int j = 0; j < NT; j += 2) {  // two n8 tiles an ldmatrix
        unsigned r4[4];
        mma::ldmatrix_x4(r4, mma::smem_address(sb + swizzle(wn * 32 + j * 8 + lane % 8 + lane / 16 * 8, kk * 2 + lane / 8 % 2)));
        bf[j][0] = r4[0], bf[j][1] = r4[1], bf[j + 1][0] = r4[2], bf[j + 1][1] = r4[3];
      }
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        unsigned af[4];
        mma::ldmatrix_x4(af, mma::smem_address(sa + swizzle(wm * 32 + i * 16 + lane % 16, kk * 2 + lane / 16)));
#pragma unroll
        for (int j = 0; j < NT; ++j) mma::mma16816<T>(acc[i][j], af, bf[j][0], bf[j][1]);
      }
    }
    __syncthreads();  // every warp read the stage before a later step's copies overwrite it
  }

  // C layout: c0, c1 row r, columns c, c + 1; c2, c3 row r + 8. Gated: n8 tiles 2j (gate) and 2j + 1
  // (up) are output columns n0 + wn * 16 + j * 8 + ...
  const int row_base = m0 + wm * 32 + lane / 4;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = row_base + i * 16 + h * 8;
      if (!row_ok(m)) continue;
#pragma unroll
      for (int j = 0; j < (kGated ? NT / 2 : NT); ++j)
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          const int n = n0 + (kGated ? wn * 16 : wn * 32) + j * 8 + (lane % 4) * 2 + x;
          if (n >= N) continue;
          float v;
          if constexpr (kGated) v = activate<ACT>(acc[i][2 * j][2 * h + x]) * acc[i][2 * j + 1][2 * h + x];
          else v = acc[i][j][2 * h + x];
          c[static_cast<long long>(m) * N + n] = from_float<T>(v);
        }
    }
}

}  // namespace tileops

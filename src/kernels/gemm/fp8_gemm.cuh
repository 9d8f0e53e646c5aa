// GemmFp8FwdOp on tensor cores (sm_89+: the m16n8k32 e4m3 MMA): d[M, N] = sum over 128-wide blocks kb
// of K of (a[:, kb] @ b[:, kb]^T) * scale_a[m, kb] * scale_b[n, kb], plus a TB bias, rounded once to TO
// (manifests/gemm.yaml). A scale given per tensor is read with strides 0, so one kernel serves per-tensor,
// per-block and mixed scales.
//
// A CTA computes a 64 x 128 tile of d (CTA i: row tile i / n_tiles, column tile i % n_tiles) with 8
// warps, each 32 x 32 of it. Both operands are K-major (a [M, K], b [N, K]): 128-byte-wide tiles of
// each go through a STAGES-deep cp.async pipeline, 16-byte chunk c of row r stored at chunk
// c ^ (r % 8) so ldmatrix reads 8 rows in 8 distinct banks. A K block is one pipeline stage: its 4 MMA
// steps of 32 sum into float32 partials, which are then scaled by the block's scale_a * scale_b and
// added to the float32 totals (the MMA's own sums stay short, as DeepSeek-V3 does on Hopper). Rows,
// columns and K past the matrices load zeros.
// Host side: K % 16 == 0 and 16-byte aligned a and b rows (cp.async chunks), contiguous tensors.
#pragma once
#include "common/dtypes.cuh"
#include "common/mma.cuh"

namespace tileops {
namespace fp8_gemm {

// A CTA's tile of d (kBM x kBN) and a K block; 8 warps, each 32 x 32 of the tile (2 along M, 4 along
// N). 128 rows a CTA would need 16 warps, whose 128 registers a thread do not hold the partials and totals.
constexpr int kBM = 64, kBN = 128, kBK = 128, kWarps = 8;

// C += A * B for one m16n8k32 tile of e4m3 operands (A row-major 16 x 32 bytes, B 32 x 8 K-major).
__device__ __forceinline__ void mma_e4m3(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Byte offset of 16-byte chunk c of row r in a tile of 128-byte rows.
__device__ __forceinline__ int swizzle(int r, int c) { return r * kBK + ((c ^ (r & 7)) << 4); }

}  // namespace fp8_gemm

template <typename TO, typename TB, int STAGES>
__global__ void __launch_bounds__(fp8_gemm::kWarps * 32, 1)
    fp8_gemm_fwd(const unsigned char* __restrict__ a, const unsigned char* __restrict__ b,
                 const float* __restrict__ scale_a, const float* __restrict__ scale_b, const TB* __restrict__ bias,
                 TO* __restrict__ d, int M, int N, int K, int sa_row, int sa_block, int sb_row, int sb_block,
                 int n_tiles) {
  using namespace fp8_gemm;
  static_assert(STAGES >= 2, "a block in flight while one is read");
  constexpr int BM = kBM, MT = 2;             // m16 tiles a warp (its 32 rows)
  constexpr int THREADS = kWarps * 32;
  constexpr int NT = 4;                       // n8 tiles a warp (its 32 columns)
  constexpr int A_BYTES = BM * kBK, B_BYTES = kBN * kBK;
  extern __shared__ __align__(128) unsigned char fp8_smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 4, wn = warp % 4;
  const int m0 = static_cast<int>(blockIdx.x) / n_tiles * BM, n0 = static_cast<int>(blockIdx.x) % n_tiles * kBN;
  const int blocks = (K + kBK - 1) / kBK;

  // Stage s of block kb: a's BM x 128 bytes then b's 128 x 128, zeros outside the matrices.
  auto load = [&](int kb) {
    unsigned char* sa = fp8_smem + (kb % STAGES) * (A_BYTES + B_BYTES);
    unsigned char* sb = sa + A_BYTES;
    const int k0 = kb * kBK;
#pragma unroll
    for (int i = threadIdx.x; i < BM * 8; i += THREADS) {
      const int r = i / 8, c = i % 8;
      const bool ok = m0 + r < M && k0 + c * 16 < K;
      const unsigned char* src = a + (ok ? static_cast<long long>(m0 + r) * K + k0 + c * 16 : 0);
      mma::copy16(mma::smem_address(sa + swizzle(r, c)), src, ok);
    }
#pragma unroll
    for (int i = threadIdx.x; i < kBN * 8; i += THREADS) {
      const int r = i / 8, c = i % 8;
      const bool ok = n0 + r < N && k0 + c * 16 < K;
      const unsigned char* src = b + (ok ? static_cast<long long>(n0 + r) * K + k0 + c * 16 : 0);
      mma::copy16(mma::smem_address(sb + swizzle(r, c)), src, ok);
    }
  };

  float total[MT][NT][4] = {};

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < blocks) load(s);
    mma::commit();
  }

  // This lane's rows (m16 tile i: rows[i][0] and rows[i][0] + 8) and columns (n8 tile j: 2 of them).
  const int row_base = m0 + wm * 32 + lane / 4;
  const int col_base = n0 + wn * 32 + (lane % 4) * 2;

  for (int kb = 0; kb < blocks; ++kb) {
    if (kb + STAGES - 1 < blocks) load(kb + STAGES - 1);
    mma::commit();  // one group a block, empty or not: the wait below counts them
    mma::wait<STAGES - 1>();
    __syncthreads();
    const unsigned char* sa = fp8_smem + (kb % STAGES) * (A_BYTES + B_BYTES);
    const unsigned char* sb = sa + A_BYTES;

    float part[MT][NT][4] = {};
#pragma unroll
    for (int ks = 0; ks < kBK / 32; ++ks) {  // 32 bytes of K: chunks 2 ks, 2 ks + 1
      unsigned bf[NT][2];
#pragma unroll
      for (int j = 0; j < NT; j += 2) {  // two n8 tiles an ldmatrix
        unsigned r4[4];
        mma::ldmatrix_x4(r4, mma::smem_address(sb + swizzle(wn * 32 + j * 8 + lane % 8 + lane / 16 * 8, ks * 2 + lane / 8 % 2)));
        bf[j][0] = r4[0], bf[j][1] = r4[1], bf[j + 1][0] = r4[2], bf[j + 1][1] = r4[3];
      }
#pragma unroll
      for (int i = 0; i < MT; ++i) {  // one m16 tile of a at a time: fewer registers live
        unsigned af[4];
        mma::ldmatrix_x4(af, mma::smem_address(sa + swizzle(wm * 32 + i * 16 + lane % 16, ks * 2 + lane / 16)));
#pragma unroll
        for (int j = 0; j < NT; ++j) fp8_gemm::mma_e4m3(part[i][j], af, bf[j][0], bf[j][1]);
      }
    }
    __syncthreads();  // every warp read the stage before a later block's copies overwrite it

    // The block's scales: scale_a[m, kb] for the lane's rows, scale_b[n, kb] for its columns.
    float sa_r[MT][2], sb_c[NT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = min(row_base + i * 16 + h * 8, M - 1);
        sa_r[i][h] = scale_a[static_cast<long long>(m) * sa_row + static_cast<long long>(kb) * sa_block];
      }
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int n = min(col_base + j * 8 + e, N - 1);
        sb_c[j][e] = scale_b[static_cast<long long>(n) * sb_row + static_cast<long long>(kb) * sb_block];
      }
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) total[i][j][e] = fmaf(part[i][j][e], sa_r[i][e / 2] * sb_c[j][e % 2], total[i][j][e]);
  }

  // C layout: c0, c1 row r, columns c, c + 1; c2, c3 row r + 8.
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = row_base + i * 16 + h * 8;
        if (m >= M) continue;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int n = col_base + j * 8 + e;
          if (n >= N) continue;
          float v = total[i][j][2 * h + e];
          if (bias != nullptr) v += to_float(bias[n]);
          d[static_cast<long long>(m) * N + n] = from_float<TO>(v);
        }
      }
}

}  // namespace tileops

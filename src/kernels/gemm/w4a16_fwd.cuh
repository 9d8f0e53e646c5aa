// GemmW4A16FwdOp for decode-sized activations (M <= 8 * MT): out[M, N] = x[M, K] @ w[N, K]^T with
// w[n, k] = (q - zero) * scale, the scale rounded to T first and the product rounded to T once
// (manifests/gemm.yaml), 4-bit q two a byte along K (even k in the low nibble).
//
// A CTA owns 16 weight rows; its WARPS warps take turns over K in chunks of 128 and add up in shared
// memory at the end. Within a chunk, lane (r, j) = (lane / 4, lane % 4) reads 16 bytes (32 values of K)
// of rows r and r + 8 and dequantizes them straight into the A fragments of eight m16n8k16 MMAs; the
// activation rows are the B operand (row m of x is B's column m, the MMA's 8 columns are 8 rows of x).
// The order of K inside an MMA is free as long as A and B agree, so each lane pairs the values its
// nibbles give cheaply, (k, k + 4) of each word of 8, and shuffles x the same way.
// Host side: K % 32 == 0, group_size % 32 == 0 (a lane's 32 values share one group), 16-byte aligned
// x and packed weight, contiguous tensors; M <= 8 * MT.
#pragma once
#include "common/dtypes.cuh"
#include "common/mma.cuh"

namespace tileops {
namespace w4a16 {

// A T with an integer 0..15 OR-ed into its low mantissa bits is exactly kMagic + q (f16: 1024, whose
// ulp is 1; bf16: 128, likewise), in both halves of a packed pair.
template <typename T> struct Packed;
template <> struct Packed<f16> {
  static constexpr unsigned kMagic = 0x64006400u, kNegMagic = 0xE400E400u, kOne = 0x3C003C00u;
};
template <> struct Packed<bf16> {
  static constexpr unsigned kMagic = 0x43004300u, kNegMagic = 0xC300C300u, kOne = 0x3F803F80u;
};
constexpr unsigned kNegZero = 0x80008000u;

// a * b + c on two packed T values, rounded once (a * b + -0 is the product rounded).
template <typename T> __device__ __forceinline__ unsigned fma2(unsigned a, unsigned b, unsigned c);
template <> __device__ __forceinline__ unsigned fma2<f16>(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
template <> __device__ __forceinline__ unsigned fma2<bf16>(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Values t and t + 4 of a word of eight nibbles as a packed pair of weights: q - magic and q - zero
// are exact (|q - zero| <= 255 fits both types' significands), the product with the scale rounds once.
template <typename T>
__device__ __forceinline__ unsigned dequant_pair(unsigned word, int t, unsigned neg_zero2, unsigned scale2) {
  const unsigned biased = ((word >> (4 * t)) & 0x000F000Fu) | Packed<T>::kMagic;
  const unsigned q = fma2<T>(biased, Packed<T>::kOne, Packed<T>::kNegMagic);
  return fma2<T>(fma2<T>(q, Packed<T>::kOne, neg_zero2), scale2, kNegZero);
}

struct alignas(16) U4 {
  unsigned x, y, z, w;
};

__device__ __forceinline__ U4 load_streamed(const void* p) {  // read once: keep it out of L1
  U4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ U4 load_shared_by_ctas(const void* p) {  // x: every CTA reads it
  U4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned select_halves(unsigned a, unsigned b, unsigned sel) {
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// One chunk's weights for a lane: 16 bytes of each of its two rows, with their group's scale and zero.
struct Chunk {
  U4 q[2];
  float scale[2];
  int zero[2];
};

}  // namespace w4a16

template <typename T, int MT, int WARPS>
__global__ void __launch_bounds__(WARPS * 32, 1)  // min 1 CTA an SM: without it ptxas spilled the 16-row form on sm_80
    w4a16_fwd(const T* __restrict__ x, const unsigned char* __restrict__ w, const float* __restrict__ scale,
              const unsigned char* __restrict__ zero, T* __restrict__ out, int M, int N, int K, int group_size,
              int groups) {
  using namespace w4a16;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r = lane >> 2, j = lane & 3;
  const int n0 = blockIdx.x * 16;
  const int row0 = n0 + r;  // and row0 + 8
  const int chunks = (K + 127) / 128;

  auto fetch = [=](int c) {
    Chunk ch{};
    const int k = c * 128 + 32 * j;  // this lane's 32 values of K
    if (k >= K) return ch;           // past the end: zero weights (x reads zeros there too)
    const int g = k / group_size;
    if (row0 < N) {
      ch.q[0] = load_streamed(w + static_cast<long long>(row0) * (K / 2) + k / 2);
      ch.scale[0] = scale[static_cast<long long>(row0) * groups + g];
      ch.zero[0] = zero[static_cast<long long>(row0) * groups + g];
    }
    if (row0 + 8 < N) {
      ch.q[1] = load_streamed(w + static_cast<long long>(row0 + 8) * (K / 2) + k / 2);
      ch.scale[1] = scale[static_cast<long long>(row0 + 8) * groups + g];
      ch.zero[1] = zero[static_cast<long long>(row0 + 8) * groups + g];
    }
    return ch;
  };

  float acc[MT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.f;

  Chunk next = warp < chunks ? fetch(warp) : Chunk{};
  for (int c = warp; c < chunks; c += WARPS) {
    const Chunk cur = next;
    if (c + WARPS < chunks) next = fetch(c + WARPS);  // one chunk in flight while this one is used

    // A fragments of the chunk's 8 MMAs: MMA 2 * word + half takes pairs (2 half, 2 half + 1) of the word.
    unsigned a[8][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const unsigned scale2 = mma::pack2<T>(cur.scale[h], cur.scale[h]);
      const unsigned neg_zero2 = mma::pack2<T>(-static_cast<float>(cur.zero[h]), -static_cast<float>(cur.zero[h]));
      const unsigned words[4] = {cur.q[h].x, cur.q[h].y, cur.q[h].z, cur.q[h].w};
#pragma unroll
      for (int wd = 0; wd < 4; ++wd)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          a[2 * wd + half][h] = dequant_pair<T>(words[wd], 2 * half, neg_zero2, scale2);
          a[2 * wd + half][h + 2] = dequant_pair<T>(words[wd], 2 * half + 1, neg_zero2, scale2);
        }
    }

    const int k = c * 128 + 32 * j;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int m = mt * 8 + r;  // B's column r is row m of x
      U4 xv[4] = {};
      if (m < M && k < K) {
        const T* xr = x + static_cast<long long>(m) * K + k;
#pragma unroll
        for (int wd = 0; wd < 4; ++wd) xv[wd] = load_shared_by_ctas(xr + 8 * wd);
      }
#pragma unroll
      for (int wd = 0; wd < 4; ++wd) {
        // x values 0..7 of the word: halves of .x = (0, 1), .y = (2, 3), .z = (4, 5), .w = (6, 7);
        // B pairs (t, t + 4) as the weights: low halves of (.x, .z) / (.y, .w), then the high halves.
        const unsigned lo[2] = {xv[wd].x, xv[wd].y}, hi[2] = {xv[wd].z, xv[wd].w};
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const unsigned b0 = select_halves(lo[half], hi[half], 0x5410);
          const unsigned b1 = select_halves(lo[half], hi[half], 0x7632);
          mma::mma16816<T>(acc[mt], a[2 * wd + half], b0, b1);
        }
      }
    }
  }

  // The warps' partial sums of the CTA's 16 rows x 8 * MT columns, added in a fixed order.
  __shared__ float part[WARPS][MT * 128];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) part[warp][mt * 128 + e * 32 + lane] = acc[mt][e];
  __syncthreads();
  for (int i = threadIdx.x; i < MT * 128; i += WARPS * 32) {
    float s = 0.f;
#pragma unroll
    for (int wp = 0; wp < WARPS; ++wp) s += part[wp][i];
    const int mt = i / 128, e = (i / 32) % 4, ln = i % 32;
    const int n = n0 + (ln >> 2) + (e >= 2 ? 8 : 0);  // C: c0, c1 row r; c2, c3 row r + 8
    const int m = mt * 8 + 2 * (ln & 3) + (e & 1);    // columns 2 j, 2 j + 1
    if (n < N && m < M) out[static_cast<long long>(m) * N + n] = from_float<T>(s);
  }
}

}  // namespace tileops

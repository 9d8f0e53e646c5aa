// GemmW4A16FwdOp's weight dequantised to T for a GEMM library: out[N, K] = (q - zero) * scale, rounded
// exactly as w4a16_fwd rounds it (the scale to T first, the product once; manifests/gemm.yaml).
//
// A thread takes one 32-bit word of the packed weight: eight values of K of one row, all in one group,
// written as 16 bytes. Host side: K % 8 == 0, group_size % 8 == 0, a 4-byte aligned contiguous packed
// weight, contiguous scale and zero, a 16-byte aligned contiguous output.
#pragma once
#include "gemm/w4a16_fwd.cuh"

namespace tileops {

template <typename T>
__global__ void __launch_bounds__(256)
    w4a16_dequant(const unsigned* __restrict__ w, const float* __restrict__ scale,
                  const unsigned char* __restrict__ zero, T* __restrict__ out, long long words, int K,
                  int group_size, int groups) {
  using namespace w4a16;
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= words) return;
  const int words_a_row = K / 8;
  const long long row = i / words_a_row;
  const int k = static_cast<int>(i - row * words_a_row) * 8;
  const long long s = row * groups + k / group_size;
  const float sc = scale[s], neg_zero = -static_cast<float>(zero[s]);
  const unsigned scale2 = mma::pack2<T>(sc, sc), neg_zero2 = mma::pack2<T>(neg_zero, neg_zero);
  unsigned word;
  asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(word) : "l"(w + i));
  // dequant_pair gives values (t, t + 4) of the word; the output wants them in order, two a word.
  unsigned p[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) p[t] = dequant_pair<T>(word, t, neg_zero2, scale2);
  U4 v;
  v.x = select_halves(p[0], p[1], 0x5410);  // values 0, 1
  v.y = select_halves(p[2], p[3], 0x5410);  // 2, 3
  v.z = select_halves(p[0], p[1], 0x7632);  // 4, 5
  v.w = select_halves(p[2], p[3], 0x7632);  // 6, 7
  *reinterpret_cast<U4*>(out + row * K + k) = v;
}

}  // namespace tileops

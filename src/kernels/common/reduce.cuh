// Sums across the TPR threads that share one row. TPR is a power of two; groups of TPR <= 32 sit
// inside one warp (shuffles only); larger groups are whole CTAs (ROWS == 1) and go through `scratch`.
#pragma once

namespace tileops {

template <int TPR>
__device__ __forceinline__ float group_sum(float v, float* scratch) {
#pragma unroll
  for (int offset = (TPR < 32 ? TPR : 32) / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  if constexpr (TPR > 32) {
    constexpr int kWarps = TPR / 32;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < kWarps ? scratch[lane] : 0.f;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

}  // namespace tileops

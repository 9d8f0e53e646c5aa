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

namespace tileops {

// A struct of floats shuffled field by field (S is trivially copyable, a multiple of 4 bytes).
template <typename S>
__device__ __forceinline__ S shfl_xor_fields(const S& v, int offset) {
  static_assert(sizeof(S) % 4 == 0, "shuffle whole 32-bit fields");
  S out;
  const float* in = reinterpret_cast<const float*>(&v);
  float* o = reinterpret_cast<float*>(&out);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(S) / 4); ++i) o[i] = __shfl_xor_sync(0xffffffffu, in[i], offset);
  return out;
}

// One reduction of a struct of partial results (e.g. (max, sum of exp) or (count, mean, M2)) across
// the TPR threads of a row: `combine` must be commutative (every thread then gets the same value,
// bit for bit) and associative up to rounding. Layout rules as group_sum; scratch holds TPR/32 S.
template <int TPR, typename S, typename F>
__device__ __forceinline__ S group_reduce(S v, S* scratch, F combine) {
#pragma unroll
  for (int offset = (TPR < 32 ? TPR : 32) / 2; offset > 0; offset /= 2) v = combine(v, shfl_xor_fields(v, offset));
  if constexpr (TPR > 32) {
    constexpr int kWarps = TPR / 32;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    // Each group of kWarps lanes reduces all warps' values in the same tree: no identity needed.
    v = scratch[lane % kWarps];
#pragma unroll
    for (int offset = kWarps / 2; offset > 0; offset /= 2) v = combine(v, shfl_xor_fields(v, offset));
  }
  return v;
}

}  // namespace tileops

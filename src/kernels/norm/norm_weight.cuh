// The weight of a row norm beside VEC elements of the row: VEC weights of type W (the row's dtype, or
// float32 beside a 16-bit row), read in accesses of at most 16 bytes, and the factor each scales by:
// w, or Gemma's 1 + w, formed in float32.
#pragma once
#include "common/dtypes.cuh"

namespace tileops {

template <typename W, int VEC>
struct WeightVec {
  // Eight float32 weights beside eight bfloat16 elements are two 16-byte loads, not one of 32 bytes
  // (the pointer is only known to be 16-byte aligned).
  static constexpr int kPart = VEC * sizeof(W) <= 16 ? VEC : 16 / static_cast<int>(sizeof(W));
  Vec<W, kPart> part[VEC / kPart];

  // Vector c of the weight (elements c * VEC ... c * VEC + VEC - 1).
  __device__ __forceinline__ void load(const W* w, int c) {
    const Vec<W, kPart>* src = reinterpret_cast<const Vec<W, kPart>*>(w) + c * (VEC / kPart);
#pragma unroll
    for (int k = 0; k < VEC / kPart; ++k) part[k] = src[k];
  }
  template <bool GEMMA>
  __device__ __forceinline__ float factor(int j) const {
    const float f = to_float(part[j / kPart].v[j % kPart]);
    return GEMMA ? 1.f + f : f;
  }
};

}  // namespace tileops

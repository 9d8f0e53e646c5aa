// The hardware's approximate exp2 and reciprocal (MUFU, relative error ~2^-22, flushing denormals),
// and exp from exp2: libdevice's accurate expf is several times the instructions, which made the
// reductions that take an exp per element arithmetic-bound. exp(-inf) = 0, exp(NaN) = NaN.
#pragma once

namespace tileops {

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
constexpr float kLog2e = 1.4426950408889634f;
__device__ __forceinline__ float fast_exp(float x) { return exp2_approx(x * kLog2e); }

}  // namespace tileops

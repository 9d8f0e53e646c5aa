// The hardware's approximate exp2 and reciprocal (MUFU, relative error ~2^-22, flushing denormals),
// NaN-propagating max and min, and exp from exp2: libdevice's accurate expf is several times the
// instructions, which made the reductions that take an exp per element arithmetic-bound.
// exp(-inf) = 0, exp(NaN) = NaN.
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
// max / min with a NaN winning: one instruction from sm_80 on (fmaxf drops a NaN). Of +0 and -0
// either may come out.
__device__ __forceinline__ float fmax_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || a > b) ? a : b;
#endif
}
__device__ __forceinline__ float fmin_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || a < b) ? a : b;
#endif
}
constexpr float kLog2e = 1.4426950408889634f;
__device__ __forceinline__ float fast_exp(float x) { return exp2_approx(x * kLog2e); }

}  // namespace tileops

// Storage types and conversions for NVRTC kernels. Torch-free and header-free on purpose: NVRTC
// compiles these without the CUDA toolkit's include folder (no cuda_fp16.h needed at run time).
#pragma once

namespace tileops {

struct alignas(2) f16 { unsigned short bits; };
struct alignas(2) bf16 { unsigned short bits; };

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(f16 v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  return f;
}
__device__ __forceinline__ float to_float(bf16 v) { return __uint_as_float(static_cast<unsigned>(v.bits) << 16); }
// Integer and bool storage (inputs only): round to nearest, as torch's int -> float32 casts.
__device__ __forceinline__ float to_float(bool v) { return v ? 1.f : 0.f; }
__device__ __forceinline__ float to_float(unsigned char v) { return static_cast<float>(v); }
__device__ __forceinline__ float to_float(signed char v) { return static_cast<float>(v); }
__device__ __forceinline__ float to_float(short v) { return static_cast<float>(v); }
__device__ __forceinline__ float to_float(int v) { return static_cast<float>(v); }
__device__ __forceinline__ float to_float(long long v) { return static_cast<float>(v); }

template <typename T> __device__ __forceinline__ T from_float(float f);
template <> __device__ __forceinline__ float from_float<float>(float f) { return f; }
template <> __device__ __forceinline__ f16 from_float<f16>(float f) {
  f16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
template <> __device__ __forceinline__ bf16 from_float<bf16>(float f) {
  bf16 h;
#if __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
#else
  // Round to nearest even by hand; NaN stays a (quiet) NaN.
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) { h.bits = static_cast<unsigned short>((u >> 16) | 0x40u); return h; }
  u += 0x7fffu + ((u >> 16) & 1u);
  h.bits = static_cast<unsigned short>(u >> 16);
#endif
  return h;
}

// VEC elements moved as one access (16 bytes when VEC * sizeof(T) == 16).
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

}  // namespace tileops

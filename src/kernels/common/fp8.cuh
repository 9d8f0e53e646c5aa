// float8_e4m3fn storage and its conversions: float32 -> e4m3fn for the quantising kernels
// (RMSNorm*QuantFwdOp in norm/rms_norm_fwd.cuh, FP8QuantFwdOp in quantization/fp8_quant_fwd.cuh),
// e4m3fn -> float32 for the paged prefill's FP8 cache (attention/prefill.cuh).
// Torch-free, no fp8 intrinsics: any arch.
#pragma once

namespace tileops {

// float8_e4m3fn storage: one byte, written by to_e4m3.
struct alignas(1) fp8_e4m3 { unsigned char bits; };

// v (finite, |v| <= 448) to float8_e4m3fn, rounded to nearest even.
__device__ __forceinline__ unsigned char to_e4m3(float v) {
  const unsigned char sign = (__float_as_uint(v) >> 24) & 0x80u;
  const float a = fabsf(v);
  // Subnormals are multiples of 2^-9; 8 of them round up into the smallest normal, encoded next.
  if (a < 0.015625f) return sign | static_cast<unsigned char>(__float2int_rn(a * 512.f));
  unsigned int b = __float_as_uint(a);
  b += 0x7ffffu + ((b >> 20) & 1u);  // round the mantissa to 3 bits, ties to even
  const unsigned int e = (b >> 23) - 120u, m = (b >> 20) & 7u;
  return sign | static_cast<unsigned char>((e << 3) | m);
}

// torch's v.clamp(-448, 448).to(torch.float8_e4m3fn): saturated, rounded to nearest even, and a
// NaN stays a NaN (0x7f; fminf/fmaxf alone would turn it into 448).
__device__ __forceinline__ unsigned char to_e4m3_sat(float v) {
  if (v != v) return 0x7fu;
  return to_e4m3(fmaxf(-448.f, fminf(v, 448.f)));
}

// float8_e4m3fn to float32, exactly: bias 7, subnormals m * 2^-9, 0x7f / 0xff the only NaNs.
__device__ __forceinline__ float e4m3_to_float(unsigned char b) {
  const unsigned sign = (b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return __uint_as_float(sign | 0x7fc00000u);
  if (e == 0u) return sign ? -0.001953125f * m : 0.001953125f * m;
  return __uint_as_float(sign | ((e + 120u) << 23) | (m << 20));
}

}  // namespace tileops

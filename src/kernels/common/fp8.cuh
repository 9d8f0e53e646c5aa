// float8_e4m3fn storage and the float32 -> e4m3fn conversion shared by the quantising kernels
// (RMSNorm*QuantFwdOp in norm/rms_norm_fwd.cuh, FP8QuantFwdOp in quantization/fp8_quant_fwd.cuh).
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

}  // namespace tileops

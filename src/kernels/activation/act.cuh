// The activation functions of the activation family, in float32 (torch's opmath for fp16/bf16).
// ACT ids are shared with the host (src/targets/nvrtc/activation_fwd.h: enum class Act).
#pragma once

namespace tileops {

enum : int { kActRelu = 0, kActSilu = 1, kActGelu = 2, kActGeluTanh = 3, kActSigmoid = 4 };

namespace act_detail {
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
}  // namespace act_detail

// FAST (chosen by the kernels when the result is rounded to float16/bfloat16): the logistic
// function from ex2.approx and rcp.approx (relative error ~2^-22, far below half an ulp of a
// 16-bit result) instead of expf and an IEEE division, which made SiLU compute-bound at 128 MB on
// the H200. Limits agree with the exact form: 1/(1+inf) = 0, and silu(-inf) is NaN in both.
template <int ACT, bool FAST = false>
__device__ __forceinline__ float activate(float x) {
  constexpr float kLog2e = 1.4426950408889634f;
  if constexpr (FAST && (ACT == kActSilu || ACT == kActSigmoid)) {
    const float sig = act_detail::rcp_approx(1.f + act_detail::exp2_approx(-x * kLog2e));
    return ACT == kActSilu ? x * sig : sig;
  } else if constexpr (ACT == kActRelu) {
    return x <= 0.f ? 0.f : x;  // NaN fails the test and stays NaN, as torch.relu
  } else if constexpr (ACT == kActSilu) {
    return x / (1.f + expf(-x));  // torch's formula; expf (not __expf) for its accuracy
  } else if constexpr (ACT == kActGelu) {
    return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));  // x * Phi(x), 1/sqrt(2)
  } else if constexpr (ACT == kActSigmoid) {
    return 1.f / (1.f + expf(-x));  // torch's formula; 0 for x -> -inf, 1 for x -> +inf
  } else {
    // F.gelu(approximate='tanh'): sqrt(2/pi) * (x + 0.044715 x^3)
    const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.f + tanhf(inner));
  }
}

}  // namespace tileops

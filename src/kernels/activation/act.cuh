// The activation functions of the activation family, in float32 (torch's opmath for fp16/bf16).
// ACT ids: common/op_ids.cuh (the host names them in src/targets/nvrtc/activation/activation.h).
#pragma once
#include "common/fast_math.cuh"
#include "common/op_ids.cuh"

namespace tileops {

namespace act_detail {

// Phi(x), the standard normal CDF, from erfc(z) = t * exp(p(t) - z^2) with t = 1 / (1 + z / 2),
// z = |x| / sqrt(2), and p the degree-9 Chebyshev fit of Numerical Recipes' erfcc (relative error
// of the fit below 1.2e-7 for every z >= 0; evaluated in fp32, ~1e-5 in the far tails, where z^2
// is large: far below half an ulp of the 16-bit results it serves). Branch-free, one ex2 and one
// rcp: libdevice's erff takes two polynomial paths that a warp of mixed |x| runs both of, which
// made GELU compute-bound (docs/PERF.md). Phi(+inf) = 1, Phi(-inf) = 0, Phi(NaN) = NaN.
__device__ __forceinline__ float normal_cdf(float x) {
  const float z = fabsf(x) * 0.70710678118654752f;
  const float t = rcp_approx(fmaf(0.5f, z, 1.f));
  float p = 0.17087277f;
  p = fmaf(p, t, -0.82215223f);
  p = fmaf(p, t, 1.48851587f);
  p = fmaf(p, t, -1.13520398f);
  p = fmaf(p, t, 0.27886807f);
  p = fmaf(p, t, -0.18628806f);
  p = fmaf(p, t, 0.09678418f);
  p = fmaf(p, t, 0.37409196f);
  p = fmaf(p, t, 1.00002368f);
  p = fmaf(p, t, -1.26551223f);
  const float half_erfc = 0.5f * t * exp2_approx((p - z * z) * kLog2e);  // Phi(-|x|)
  return x >= 0.f ? 1.f - half_erfc : half_erfc;
}
}  // namespace act_detail

// FAST (chosen by the kernels when the result is rounded to float16/bfloat16): the logistic
// function from ex2.approx and rcp.approx (relative error ~2^-22, far below half an ulp of a
// 16-bit result) instead of expf and an IEEE division, which made SiLU compute-bound on large tensors
// (docs/PERF.md); GELU from normal_cdf above, tanh-GELU and QuickGELU as x times a logistic. Limits
// agree with the exact forms: 1/(1+inf) = 0, silu(-inf) and gelu(-inf) are NaN in both.
template <int ACT, bool FAST = false>
__device__ __forceinline__ float activate(float x) {
  if constexpr (FAST && (ACT == kActSilu || ACT == kActSigmoid)) {
    const float sig = rcp_approx(1.f + exp2_approx(-x * kLog2e));
    return ACT == kActSilu ? x * sig : sig;
  } else if constexpr (FAST && ACT == kActGeluTanh) {
    // 0.5 * (1 + tanh(u)) is the logistic function of 2u: one ex2 and one rcp instead of tanhf.
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x * rcp_approx(1.f + exp2_approx(-2.f * kLog2e * u));
  } else if constexpr (FAST && ACT == kActGelu) {
    return x * act_detail::normal_cdf(x);
  } else if constexpr (FAST && ACT == kActQuickGelu) {
    return x * rcp_approx(1.f + exp2_approx(-1.702f * kLog2e * x));
  } else if constexpr (ACT == kActRelu) {
    return x <= 0.f ? 0.f : x;  // NaN fails the test and stays NaN, as torch.relu
  } else if constexpr (ACT == kActSilu) {
    return x / (1.f + expf(-x));  // torch's formula; expf (not __expf) for its accuracy
  } else if constexpr (ACT == kActGelu) {
    return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));  // x * Phi(x), 1/sqrt(2)
  } else if constexpr (ACT == kActSigmoid) {
    return 1.f / (1.f + expf(-x));  // torch's formula; 0 for x -> -inf, 1 for x -> +inf
  } else if constexpr (ACT == kActQuickGelu) {
    return x / (1.f + expf(-1.702f * x));  // x * sigmoid(1.702 x), vLLM's gelu_quick formula
  } else {
    static_assert(ACT == kActGeluTanh, "a gated-only function (gated_fwd.cuh) is not a unary activation");
    // F.gelu(approximate='tanh'): sqrt(2/pi) * (x + 0.044715 x^3)
    const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.f + tanhf(inner));
  }
}

}  // namespace tileops

// The activation functions of the activation family, in float32 (torch's opmath for fp16/bf16).
// ACT ids are shared with the host (src/targets/nvrtc/activation_fwd.h: enum class Act).
#pragma once

namespace tileops {

enum : int { kActRelu = 0, kActSilu = 1, kActGelu = 2, kActGeluTanh = 3, kActSigmoid = 4 };

template <int ACT>
__device__ __forceinline__ float activate(float x) {
  if constexpr (ACT == kActRelu) {
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

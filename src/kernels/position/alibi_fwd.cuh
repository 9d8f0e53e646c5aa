// ALiBi slopes, one thread per head (see manifests/position.yaml for the formula).
#pragma once

namespace tileops {

__global__ void alibi_slopes_fwd(float* __restrict__ slopes, int num_heads) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= num_heads) return;
  int n = 1;
  while (n * 2 <= num_heads) n *= 2;  // largest power of two <= num_heads
  // exp2f keeps the exact powers of two the formula produces for power-of-two head counts.
  slopes[h] = h < n ? exp2f(-8.0f * (h + 1) / n) : exp2f(-4.0f * (2 * (h - n) + 1) / n);
}

}  // namespace tileops

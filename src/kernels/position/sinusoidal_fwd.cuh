// Sinusoidal position table [num_positions, dim], interleaved (see manifests/position.yaml):
// out[p, 2i] = sin(p * base^(-2i/dim)), out[p, 2i+1] = cos(same angle).
// One thread writes VEC consecutive elements (VEC/2 pairs, one 16-byte store when VEC * sizeof(T)
// == 16). The angle is formed and reduced modulo 2*pi in float64 so large positions keep full
// accuracy; sin/cos themselves run in float32. Host side: dim % VEC == 0, VEC even, out aligned.
#pragma once
#include "common/dtypes.cuh"

namespace tileops {

template <typename T, int VEC>
__global__ void sinusoidal_fwd(T* __restrict__ out, long long num_vecs, int dim, double log2_base) {
  const long long v = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= num_vecs) return;
  const long long e = v * VEC;
  const long long p = e / dim;
  const int col = static_cast<int>(e - p * dim);
  Vec<T, VEC> o;
#pragma unroll
  for (int j = 0; j < VEC / 2; ++j) {
    const int i2 = col + 2 * j;  // 2i
    const double angle = static_cast<double>(p) * exp2(-static_cast<double>(i2) / dim * log2_base);
    const double turns = rint(angle * 0.15915494309189535);  // 1 / (2 pi)
    const float r = static_cast<float>(fma(-turns, 6.283185307179586, angle));
    float s, c;
    sincosf(r, &s, &c);
    o.v[2 * j] = from_float<T>(s);
    o.v[2 * j + 1] = from_float<T>(c);
  }
  *reinterpret_cast<Vec<T, VEC>*>(out + e) = o;
}

}  // namespace tileops

// RMSNorm backward (RMSNormBwdOp), in float32, rounded once to T:
//   r = rsqrt(mean(x^2) + eps); g = dy * w; dx = r * (g - x * r^2 * mean(g * x));
//   dweight = sum over rows of dy * x * r (w = ones when HAS_WEIGHT is false).
// Persistent layout, staging and partials: norm_bwd_common.cuh. DW: also leave this CTA's dweight
// partial row in part_w[blockIdx.x][N] (norm_bwd_reduce sums them). part_b is unused (the launch
// arguments are shared with layer_norm_bwd).
// W is the weight's type: T, or float32 beside a 16-bit row (its dweight is then float32:
// norm_bwd_reduce<float>). Host side: src/targets/nvrtc/norm/norm_bwd_plan.cpp; requires N % VEC == 0
// and pointers aligned to VEC * sizeof(T) bytes (the weight to min(16, VEC * sizeof(W))).
#pragma once
#include "common/dtypes.cuh"
#include "norm/norm_bwd_common.cuh"

namespace tileops {

template <typename T, int N, int VEC, int TPR, int ROWS, int MIN_BLOCKS, bool HAS_WEIGHT, bool DW, bool SMEM,
          bool ACC_REG, typename W = T>
__global__ void __launch_bounds__(TPR * ROWS, MIN_BLOCKS)
rms_norm_bwd(const T* __restrict__ dy, const T* __restrict__ x, const W* __restrict__ w, T* __restrict__ dx,
             float* __restrict__ part_w, float* __restrict__ part_b, long long rows, float eps) {
  using namespace norm_bwd;
  using V = Vec<T, VEC>;
  using FV = FVec<VEC>;
  constexpr int kVecs = N / VEC;
  constexpr int kPer = (kVecs + TPR - 1) / TPR;
  constexpr int kWarps = TPR > 32 ? TPR / 32 : 1;
  // ACC_REG plans unroll the per-thread vectors (register arrays); workspace plans loop.
  constexpr bool kUnroll = ACC_REG;
  static_assert(ACC_REG || ROWS == 1, "workspace partials are owned by one row group per CTA");
  (void)part_b;
  allow_dependent_launch();  // the dweight reduction may be scheduled (it waits for this grid)

  __shared__ float scratch[2][TPR > 32 ? ROWS : 1][2 * kWarps];  // alternating by row parity
  extern __shared__ __align__(16) unsigned char smem[];

  const int t = threadIdx.x % TPR;
  const int grp = threadIdx.x / TPR;
  const RowStart<T, N, VEC, TPR, ROWS, HAS_WEIGHT, SMEM, kUnroll, W> start(x, dy, w, smem_address(smem), rows, t, grp);
  const auto& src = start.src;
  using WV = WeightVec<W, VEC>;
  auto weight = [&](int c) -> WV { return start.weight(c); };

  FV acc[ACC_REG && DW ? kPer : 1];
#pragma unroll
  for (int i = 0; i < (ACC_REG && DW ? kPer : 1); ++i) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[i].v[j] = 0.f;
  }
  FV* const part = DW ? reinterpret_cast<FV*>(part_w + static_cast<long long>(blockIdx.x) * N) : nullptr;
  bool first = true;  // workspace partials: this CTA's first row stores, later rows add

  const long long step = static_cast<long long>(gridDim.x) * ROWS;
  int k = 0;
  // base is uniform over the CTA: every thread runs the same iterations (barriers, full-warp shuffles);
  // a group past the last row only takes part in the reductions.
  for (long long base = static_cast<long long>(blockIdx.x) * ROWS; base < rows; base += step, ++k) {
    const long long r = base + grp;
    const bool active = r < rows;
    const int s = k & 1;
    if constexpr (SMEM) {
      src.template prefetch<kUnroll>(r + step, s ^ 1, t);
      copy_async_wait<1>();  // this row's copies (the group committed one iteration ago) have landed
      if constexpr (HAS_WEIGHT) {
        if (k == 0) __syncthreads();  // the weight's shared copy is complete
      }
    }
    float sums[2] = {0.f, 0.f};  // sum x^2, sum g * x
    if (active) {
      for_my_vecs<TPR, kVecs, kUnroll>(t, [&](int, int c) {
        const V xv = src.load_x(r, s, c);
        const V gv = src.load_dy(r, s, c);
        WV wv;
        if constexpr (HAS_WEIGHT) wv = weight(c);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float xf = to_float(xv.v[j]);
          float gf = to_float(gv.v[j]);
          if constexpr (HAS_WEIGHT) gf *= wv.template factor<false>(j);
          sums[0] += xf * xf;
          sums[1] += gf * xf;
        }
      });
    }
    group_sum<TPR, 2>(sums, &scratch[s][TPR > 32 ? grp : 0][0]);
    const float rs = rsqrtf(sums[0] / N + eps);
    const float coef = rs * rs * (sums[1] / N);
    if (active) {
      V* dxr = reinterpret_cast<V*>(dx) + r * kVecs;
      for_my_vecs<TPR, kVecs, kUnroll>(t, [&](int i, int c) {
        const V xv = src.load_x(r, s, c);
        const V gv = src.load_dy(r, s, c);
        WV wv;
        if constexpr (HAS_WEIGHT) wv = weight(c);
        V out;
        FV contrib;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float xf = to_float(xv.v[j]);
          const float d = to_float(gv.v[j]);
          float gf = d;
          if constexpr (HAS_WEIGHT) gf *= wv.template factor<false>(j);
          out.v[j] = from_float<T>(rs * (gf - xf * coef));
          if constexpr (DW && ACC_REG) acc[i].v[j] += d * (xf * rs);
          else contrib.v[j] = d * (xf * rs);
        }
        dxr[c] = out;
        if constexpr (DW && !ACC_REG) {
          if (!first) {
            const FV old = part[c];
#pragma unroll
            for (int j = 0; j < VEC; ++j) contrib.v[j] = old.v[j] + contrib.v[j];
          }
          part[c] = contrib;
        }
      });
    }
    first = false;
  }
  // Nothing left in flight (a CTA without rows would still be copying the weight).
  if constexpr (SMEM) copy_async_wait<0>();

  if constexpr (DW) {
    if constexpr (ACC_REG) {
      if constexpr (ROWS > 1) {
        __syncthreads();  // the stages become the combine buffer
      }
      store_partials<N, VEC, TPR, ROWS, kPer>(acc, part_w + static_cast<long long>(blockIdx.x) * N,
                                              reinterpret_cast<float*>(smem));
    } else if (first) {
      // No row reached this CTA (the host sizes the grid so that this does not happen): zeros.
      for_my_vecs<TPR, kVecs, false>(t, [&](int, int c) {
        FV z;
#pragma unroll
        for (int j = 0; j < VEC; ++j) z.v[j] = 0.f;
        part[c] = z;
      });
    }
  }
}

}  // namespace tileops

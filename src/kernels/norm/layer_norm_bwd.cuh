// LayerNorm backward (LayerNormBwdOp), in float32, rounded once to T:
//   mu = mean(x); r = rsqrt(mean((x - mu)^2) + eps) (biased variance); xh = (x - mu) * r; g = dy * w;
//   dx = r * (g - mean(g) - xh * mean(g * xh)); dweight = sum over rows of dy * xh; dbias = sum of dy.
// Mean and variance are two exact passes (the row is staged or re-read, never a one-pass E[x^2]).
// Persistent layout, staging and partials: norm_bwd_common.cuh. DW / DB: also leave this CTA's
// partial rows in part_w / part_b [blockIdx.x][N] (norm_bwd_reduce sums them).
// Host side: src/targets/nvrtc/norm_layer_norm_bwd.cpp; requires N % VEC == 0 and pointers aligned to
// VEC * sizeof(T) bytes.
#pragma once
#include "common/dtypes.cuh"
#include "norm/norm_bwd_common.cuh"

namespace tileops {

template <typename T, int N, int VEC, int TPR, int ROWS, int MIN_BLOCKS, bool HAS_WEIGHT, bool DW, bool DB, bool SMEM,
          bool ACC_REG, unsigned EPS_BITS>
__global__ void __launch_bounds__(TPR * ROWS, MIN_BLOCKS)
layer_norm_bwd(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ dx,
               float* __restrict__ part_w, float* __restrict__ part_b, long long rows) {
  using namespace norm_bwd;
  using V = Vec<T, VEC>;
  using FV = FVec<VEC>;
  constexpr int kVecs = N / VEC;
  constexpr int kPer = (kVecs + TPR - 1) / TPR;
  constexpr int kWarps = TPR > 32 ? TPR / 32 : 1;
  constexpr bool kUnroll = ACC_REG;
  static_assert(ACC_REG || ROWS == 1, "workspace partials are owned by one row group per CTA");
  allow_dependent_launch();  // the dweight reduction may be scheduled (it waits for this grid)

  // Two reductions a row, each with its own buffer: a buffer is rewritten only after the other
  // reduction's barrier, which every thread reaches after reading it.
  __shared__ float scratch_mean[TPR > 32 ? ROWS : 1][kWarps];
  __shared__ float scratch_sums[TPR > 32 ? ROWS : 1][3 * kWarps];
  extern __shared__ __align__(16) unsigned char smem[];

  const int t = threadIdx.x % TPR;
  const int grp = threadIdx.x / TPR;
  const int sg = TPR > 32 ? grp : 0;
  const V* wg = reinterpret_cast<const V*>(w);
  using Source = RowSource<T, N, VEC, TPR, ROWS, SMEM>;
  const unsigned smem_base = smem_address(smem);
  const unsigned wsm = smem_base + Source::kStageBytes;  // SMEM: the weight's shared copy
  const Source src{reinterpret_cast<const V*>(x), reinterpret_cast<const V*>(dy),
                   smem_base + grp * 2 * kVecs * Source::kVB, rows};
  if constexpr (SMEM && HAS_WEIGHT) {
    if (grp == 0) for_my_vecs<TPR, kVecs, kUnroll>(t, [&](int, int c) { store_shared(wsm + c * Source::kVB, wg[c]); });
    __syncthreads();
  }
  auto weight = [&](int c) -> V {
    if constexpr (SMEM) return load_shared<V>(wsm + c * Source::kVB);
    else return wg[c];
  };

  constexpr int kAccW = ACC_REG && DW ? kPer : 1;
  constexpr int kAccB = ACC_REG && DB ? kPer : 1;
  FV accw[kAccW], accb[kAccB];
#pragma unroll
  for (int i = 0; i < kAccW; ++i) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) accw[i].v[j] = 0.f;
  }
#pragma unroll
  for (int i = 0; i < kAccB; ++i) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) accb[i].v[j] = 0.f;
  }
  FV* const pw = DW ? reinterpret_cast<FV*>(part_w + static_cast<long long>(blockIdx.x) * N) : nullptr;
  FV* const pb = DB ? reinterpret_cast<FV*>(part_b + static_cast<long long>(blockIdx.x) * N) : nullptr;
  bool first = true;  // workspace partials: this CTA's first row stores, later rows add

  const long long step = static_cast<long long>(gridDim.x) * ROWS;
  src.template prefetch<kUnroll>(static_cast<long long>(blockIdx.x) * ROWS + grp, 0, t);
  int k = 0;
  for (long long base = static_cast<long long>(blockIdx.x) * ROWS; base < rows; base += step, ++k) {
    const long long r = base + grp;
    const bool active = r < rows;
    const int s = k & 1;
    if constexpr (SMEM) {
      src.template prefetch<kUnroll>(r + step, s ^ 1, t);
      copy_async_wait<1>();
    }
    float sum_x[1] = {0.f};
    if (active) {
      for_my_vecs<TPR, kVecs, kUnroll>(t, [&](int, int c) {
        const V xv = src.load_x(r, s, c);
#pragma unroll
        for (int j = 0; j < VEC; ++j) sum_x[0] += to_float(xv.v[j]);
      });
    }
    group_sum<TPR, 1>(sum_x, &scratch_mean[sg][0]);
    const float mean = sum_x[0] / N;

    float sums[3] = {0.f, 0.f, 0.f};  // sum (x - mu)^2, sum g, sum g * (x - mu)
    if (active) {
      for_my_vecs<TPR, kVecs, kUnroll>(t, [&](int, int c) {
        const V xv = src.load_x(r, s, c);
        const V gv = src.load_dy(r, s, c);
        V wv;
        if constexpr (HAS_WEIGHT) wv = weight(c);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float d = to_float(xv.v[j]) - mean;
          float gf = to_float(gv.v[j]);
          if constexpr (HAS_WEIGHT) gf *= to_float(wv.v[j]);
          sums[0] += d * d;
          sums[1] += gf;
          sums[2] += gf * d;
        }
      });
    }
    group_sum<TPR, 3>(sums, &scratch_sums[sg][0]);
    const float rs = rsqrtf(sums[0] / N + __uint_as_float(EPS_BITS));
    const float mean_g = sums[1] / N;
    const float coef = rs * rs * (sums[2] / N);  // xh * mean(g * xh) = (x - mu) * coef

    if (active) {
      V* dxr = reinterpret_cast<V*>(dx) + r * kVecs;
      for_my_vecs<TPR, kVecs, kUnroll>(t, [&](int i, int c) {
        const V xv = src.load_x(r, s, c);
        const V gv = src.load_dy(r, s, c);
        V wv;
        if constexpr (HAS_WEIGHT) wv = weight(c);
        V out;
        FV cw, cb;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float d = to_float(xv.v[j]) - mean;
          const float dyf = to_float(gv.v[j]);
          float gf = dyf;
          if constexpr (HAS_WEIGHT) gf *= to_float(wv.v[j]);
          out.v[j] = from_float<T>(rs * (gf - mean_g - d * coef));
          if constexpr (ACC_REG) {
            if constexpr (DW) accw[i].v[j] += dyf * (d * rs);
            if constexpr (DB) accb[i].v[j] += dyf;
          } else {
            cw.v[j] = dyf * (d * rs);
            cb.v[j] = dyf;
          }
        }
        dxr[c] = out;
        if constexpr (!ACC_REG) {
          if constexpr (DW) {
            if (!first) {
              const FV old = pw[c];
#pragma unroll
              for (int j = 0; j < VEC; ++j) cw.v[j] = old.v[j] + cw.v[j];
            }
            pw[c] = cw;
          }
          if constexpr (DB) {
            if (!first) {
              const FV old = pb[c];
#pragma unroll
              for (int j = 0; j < VEC; ++j) cb.v[j] = old.v[j] + cb.v[j];
            }
            pb[c] = cb;
          }
        }
      });
    }
    first = false;
  }

  if constexpr (DW || DB) {
    if constexpr (ACC_REG) {
      if constexpr (ROWS > 1) {
        copy_async_wait<0>();
        __syncthreads();  // the stages become the combine buffer
      }
      float* comb = reinterpret_cast<float*>(smem);
      if constexpr (DW) store_partials<N, VEC, TPR, ROWS, kPer>(accw, part_w + static_cast<long long>(blockIdx.x) * N, comb);
      if constexpr (DB) store_partials<N, VEC, TPR, ROWS, kPer>(accb, part_b + static_cast<long long>(blockIdx.x) * N, comb);
    } else if (first) {
      // No row reached this CTA (the host sizes the grid so that this does not happen): zeros.
      for_my_vecs<TPR, kVecs, false>(t, [&](int, int c) {
        FV z;
#pragma unroll
        for (int j = 0; j < VEC; ++j) z.v[j] = 0.f;
        if constexpr (DW) pw[c] = z;
        if constexpr (DB) pb[c] = z;
      });
    }
  }
}

}  // namespace tileops

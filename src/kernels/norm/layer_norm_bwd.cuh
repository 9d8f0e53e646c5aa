// LayerNorm backward (LayerNormBwdOp), in float32, rounded once to T:
//   mu = mean(x); r = rsqrt(mean((x - mu)^2) + eps) (biased variance); xh = (x - mu) * r; g = dy * w;
//   dx = r * (g - mean(g) - xh * mean(g * xh)); dweight = sum over rows of dy * xh; dbias = sum of dy.
// Mean, variance and the two dx sums come from one merge of per-thread statistics, each centred on
// its own mean (LnStats below; never a one-pass E[x^2]).
// Persistent layout, staging and partials: norm_bwd_common.cuh. DW / DB: also leave this CTA's
// partial rows in part_w / part_b [blockIdx.x][N] (norm_bwd_reduce sums them).
// W is the weight's type: T, or float32 beside a 16-bit row (dweight and dbias are then float32).
// Host side: src/targets/nvrtc/norm/norm_bwd_plan.cpp; requires N % VEC == 0 and pointers aligned to
// VEC * sizeof(T) bytes (the weight to min(16, VEC * sizeof(W))).
#pragma once
#include "common/dtypes.cuh"
#include "norm/norm_bwd_common.cuh"

namespace tileops {
namespace norm_bwd {

// A row's statistics over some of its elements: count, mean, sum of squared deviations from that
// mean, sum of g = dy * w, and sum of g * (x - mean). Merging two (Chan et al.) keeps every sum
// centred on the mean of the elements it covers, so a row mean far from zero costs no precision
// (unlike E[x^2] - mean^2), and the row needs one reduction instead of a mean pass and then a sums pass.
struct LnStats {
  float n, mu, m2, g, gx;
};

// An empty side (n = 0, every sum and mu 0) leaves the other side's values exactly as they are, so
// no branch is needed; two empty sides give an empty result.
__device__ __forceinline__ LnStats ln_merge(const LnStats& a, const LnStats& b) {
  LnStats r;
  r.n = a.n + b.n;
  const float delta = b.mu - a.mu;
  const float fb = b.n / fmaxf(r.n, 1.f);
  r.mu = a.mu + delta * fb;
  r.m2 = (a.m2 + b.m2) + delta * delta * (a.n * fb);
  r.gx = (a.gx + b.gx) + ((a.mu - r.mu) * a.g + (b.mu - r.mu) * b.g);
  r.g = a.g + b.g;
  return r;
}

// Two sides of the same count (the tree below under EQUAL): the halves' weights are 1/2 each.
__device__ __forceinline__ LnStats ln_merge_halves(const LnStats& a, const LnStats& b) {
  const float half_delta = 0.5f * (b.mu - a.mu);
  LnStats r;
  r.n = a.n + b.n;
  r.mu = a.mu + half_delta;
  r.m2 = (a.m2 + b.m2) + 2.f * a.n * half_delta * half_delta;
  r.g = a.g + b.g;
  r.gx = (a.gx + b.gx) + half_delta * (b.g - a.g);
  return r;
}

// EQUAL: every thread of the group covers the same number of elements (s.n, the same in all), so the
// counts are not exchanged (the compiler folds them: fewer registers in the merge).
template <bool EQUAL>
__device__ __forceinline__ LnStats ln_shfl_down(const LnStats& s, int offset, int width) {
  return LnStats{EQUAL ? s.n : __shfl_down_sync(0xffffffffu, s.n, offset, width),
                 __shfl_down_sync(0xffffffffu, s.mu, offset, width), __shfl_down_sync(0xffffffffu, s.m2, offset, width),
                 __shfl_down_sync(0xffffffffu, s.g, offset, width), __shfl_down_sync(0xffffffffu, s.gx, offset, width)};
}

// Merges the TPR threads' statistics of one row group in a fixed tree (so bitwise the same run to
// run) and gives every thread of the group the result. TPR > 32: `scratch` holds 5 * TPR / 32 floats
// for this group, not reused before the next __syncthreads; every thread of the CTA must call this.
template <int TPR, bool EQUAL>
__device__ __forceinline__ LnStats ln_group_stats(LnStats s, float* scratch) {
  constexpr int kWidth = TPR < 32 ? TPR : 32;
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) {
    const LnStats o = ln_shfl_down<EQUAL>(s, offset, kWidth);
    s = EQUAL ? ln_merge_halves(s, o) : ln_merge(s, o);
  }
  if constexpr (TPR <= 32) {
    // Lane 0 of each group's segment holds the group's statistics.
    return LnStats{EQUAL ? s.n : __shfl_sync(0xffffffffu, s.n, 0, kWidth), __shfl_sync(0xffffffffu, s.mu, 0, kWidth),
                   __shfl_sync(0xffffffffu, s.m2, 0, kWidth), __shfl_sync(0xffffffffu, s.g, 0, kWidth),
                   __shfl_sync(0xffffffffu, s.gx, 0, kWidth)};
  } else {
    constexpr int kWarps = TPR / 32;
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % TPR) / 32;
    if (lane == 0) {
      scratch[0 * kWarps + warp] = s.n;
      scratch[1 * kWarps + warp] = s.mu;
      scratch[2 * kWarps + warp] = s.m2;
      scratch[3 * kWarps + warp] = s.g;
      scratch[4 * kWarps + warp] = s.gx;
    }
    __syncthreads();
    auto at = [&](int w) {
      return LnStats{EQUAL ? s.n : scratch[w], scratch[kWarps + w], scratch[2 * kWarps + w], scratch[3 * kWarps + w],
                     scratch[4 * kWarps + w]};
    };
    LnStats r = at(0);
    // One warp's values at a time: unrolled, the loads were hoisted (spills at 128 registers, f16).
#pragma unroll 1
    for (int w = 1; w < kWarps; ++w) r = ln_merge(r, at(w));
    return r;
  }
}

}  // namespace norm_bwd

template <typename T, int N, int VEC, int TPR, int ROWS, int MIN_BLOCKS, bool HAS_WEIGHT, bool DW, bool DB, bool SMEM,
          bool ACC_REG, typename W = T>
__global__ void __launch_bounds__(TPR * ROWS, MIN_BLOCKS)
layer_norm_bwd(const T* __restrict__ dy, const T* __restrict__ x, const W* __restrict__ w, T* __restrict__ dx,
               float* __restrict__ part_w, float* __restrict__ part_b, long long rows, float eps) {
  using namespace norm_bwd;
  using V = Vec<T, VEC>;
  using FV = FVec<VEC>;
  constexpr int kVecs = N / VEC;
  constexpr int kPer = (kVecs + TPR - 1) / TPR;
  constexpr int kWarps = TPR > 32 ? TPR / 32 : 1;
  constexpr bool kUnroll = ACC_REG;
  constexpr bool kEqual = kVecs % TPR == 0;
  static_assert(ACC_REG || ROWS == 1, "workspace partials are owned by one row group per CTA");
  allow_dependent_launch();  // the dweight reduction may be scheduled (it waits for this grid)

  // One merge a row, alternating buffers by row parity: a buffer is rewritten only after the next
  // row's barrier, which every thread reaches after reading it.
  __shared__ float scratch[2][TPR > 32 ? ROWS : 1][TPR > 32 ? 5 * kWarps : 1];
  extern __shared__ __align__(16) unsigned char smem[];

  const int t = threadIdx.x % TPR;
  const int grp = threadIdx.x / TPR;
  const int sg = TPR > 32 ? grp : 0;
  const RowStart<T, N, VEC, TPR, ROWS, HAS_WEIGHT, SMEM, kUnroll, W> start(x, dy, w, smem_address(smem), rows, t, grp);
  const auto& src = start.src;
  using WV = WeightVec<W, VEC>;
  auto weight = [&](int c) -> WV { return start.weight(c); };

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
  // The row group follows from the iteration k (one loop-carried register fewer than a running 64-bit
  // row: at 128 registers that was a spill). k < 2^31: more iterations would need over 2^31 * G rows.
  const long long first_row = static_cast<long long>(blockIdx.x) * ROWS;
  for (int k = 0; first_row + k * step < rows; ++k) {
    const long long base = first_row + k * step;
    const long long r = base + grp;
    const bool active = r < rows;
    const int s = k & 1;
    if constexpr (SMEM) {
      src.template prefetch<kUnroll>(r + step, s ^ 1, t);
      copy_async_wait<1>();
      if constexpr (HAS_WEIGHT) {
        if (k == 0) __syncthreads();  // the weight's shared copy is complete
      }
    }
    // This thread's elements: their mean, then sums about it; one merge over the group gives the row's.
    // Rows of whole vectors a thread (kEqual): the same count in every thread, a constant. An inactive
    // group merges empty-valued statistics (all sums 0) that nothing reads.
    LnStats st{kEqual ? static_cast<float>(kPer * VEC) : 0.f, 0.f, 0.f, 0.f, 0.f};
    if (active) {
      float sum_x = 0.f;
      for_my_vecs<TPR, kVecs, kUnroll>(t, [&](int, int c) {
        const V xv = src.load_x(r, s, c);
#pragma unroll
        for (int j = 0; j < VEC; ++j) sum_x += to_float(xv.v[j]);
        if constexpr (!kEqual) st.n += VEC;
      });
      st.mu = st.n > 0.f ? sum_x / st.n : 0.f;
      for_my_vecs<TPR, kVecs, kUnroll>(t, [&](int, int c) {
        const V xv = src.load_x(r, s, c);
        const V gv = src.load_dy(r, s, c);
        WV wv;
        if constexpr (HAS_WEIGHT) wv = weight(c);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float d = to_float(xv.v[j]) - st.mu;
          float gf = to_float(gv.v[j]);
          if constexpr (HAS_WEIGHT) gf *= wv.template factor<false>(j);
          st.m2 += d * d;
          st.g += gf;
          st.gx += gf * d;
        }
      });
    }
    st = ln_group_stats<TPR, kEqual>(st, &scratch[s][sg][0]);
    const float mean = st.mu;
    const float rs = rsqrtf(st.m2 / N + eps);
    const float mean_g = st.g / N;
    const float coef = rs * rs * (st.gx / N);  // xh * mean(g * xh) = (x - mu) * coef

    if (active) {
      V* dxr = reinterpret_cast<V*>(dx) + r * kVecs;
      for_my_vecs<TPR, kVecs, kUnroll>(t, [&](int i, int c) {
        const V xv = src.load_x(r, s, c);
        const V gv = src.load_dy(r, s, c);
        WV wv;
        if constexpr (HAS_WEIGHT) wv = weight(c);
        V out;
        FV cw, cb;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float d = to_float(xv.v[j]) - mean;
          const float dyf = to_float(gv.v[j]);
          float gf = dyf;
          if constexpr (HAS_WEIGHT) gf *= wv.template factor<false>(j);
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
  // Nothing left in flight (a CTA without rows would still be copying the weight).
  if constexpr (SMEM) copy_async_wait<0>();

  if constexpr (DW || DB) {
    if constexpr (ACC_REG) {
      if constexpr (ROWS > 1) {
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

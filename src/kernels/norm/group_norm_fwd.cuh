// GroupNorm forward (GroupNormFwdOp; InstanceNormFwdOp is num_groups = C): x contiguous [N, C, HW]
// (HW: the product of the dims after C), G groups of D = C / G channels. Row r = n * G + g is sample n's
// group g, D * HW contiguous elements: its mean and biased variance in float32, then
// y = (x - mean) * rstd * w[c] + b[c], rounded once to T (torch.nn.functional.group_norm).
//
// Accesses are VEC elements wide and VEC divides HW, so a vector never straddles two channels: a row is
// D * hv vectors, hv = HW / VEC, and vector k of a row lies in the group's channel k / hv. The host
// side (src/targets/nvrtc/norm/group_norm.cpp) picks a kernel and its template arguments:
//  - group_norm_fwd_rows: TPR threads a row, ROWS rows a CTA. CACHE > 0: the row stays in registers
//    (at most CACHE vectors a thread) and mean and variance are two exact passes over them. CACHE == 0:
//    each thread's (count, mean, M2) over its part of the row, merged by Chan's rule, then the row is
//    read again for the output.
//  - group_norm_fwd_stats, then group_norm_fwd_apply: long rows, too few of them to fill the GPU. The
//    `splits` CTAs of a row each write the moments of one chunk of it to `ws`; then `splits` CTAs a
//    row each merge all the row's moments (in one fixed order, so every CTA gets the same bits) and
//    write their chunk.
// STATS == kGroupNormRunningStats (InstanceNormFwdOp with use_input_stats=False): no reduction; each
// channel's mean and variance are the float32 running stats rm[c], rv[c].
// Sizes and indices are 64-bit: a row, and the tensor, may pass 2^31 elements.
#pragma once
#include "common/dtypes.cuh"
#include "common/reduce.cuh"

namespace tileops {

enum : int { kGroupNormInputStats = 0, kGroupNormRunningStats = 1 };

namespace group_norm_detail {

struct Moments {
  float n, mean, m2;  // count, mean, sum of squared deviations from the mean
};

// Chan's merge of the moments of two disjoint parts. The operands are put in one order first (fewer
// elements, then the smaller mean), so merge(a, b) and merge(b, a) are the same bits: every lane of a
// butterfly then ends with the same moments.
__device__ __forceinline__ Moments merge(Moments a, Moments b) {
  if (b.n < a.n || (b.n == a.n && b.mean < a.mean)) {
    const Moments t = a;
    a = b;
    b = t;
  }
  const float n = a.n + b.n;
  if (n == 0.f) return a;
  const float d = b.mean - a.mean, fb = b.n / n;
  return {n, fmaf(d, fb, a.mean), a.m2 + b.m2 + d * d * a.n * fb};
}

struct MergeMoments {
  __device__ __forceinline__ Moments operator()(const Moments& a, const Moments& b) const { return merge(a, b); }
};

// The moments of U vectors held in registers: an exact two-pass over them (U * VEC is a power of two,
// so the mean is the sum scaled exactly).
template <typename T, int VEC, int U>
__device__ __forceinline__ Moments batch_moments(const Vec<T, VEC> (&v)[U]) {
  constexpr float kN = static_cast<float>(U * VEC);
  float sum = 0.f;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int e = 0; e < VEC; ++e) sum += to_float(v[u].v[e]);
  const float mean = sum * (1.f / kN);
  float m2 = 0.f;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float d = to_float(v[u].v[e]) - mean;
      m2 = fmaf(d, d, m2);
    }
  return {kN, mean, m2};
}

// One thread's moments over vectors k, k + STRIDE, ... below `end` of a row, four loads in flight.
template <typename T, int VEC, int STRIDE>
__device__ __forceinline__ Moments thread_moments(const Vec<T, VEC>* __restrict__ row, long long k, long long end) {
  Moments s{0.f, 0.f, 0.f};
  for (; k + 3 * STRIDE < end; k += 4 * STRIDE) {
    Vec<T, VEC> v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = row[k + u * STRIDE];
    s = merge(s, batch_moments(v));
  }
  for (; k < end; k += STRIDE) {
    const Vec<T, VEC> v[1] = {row[k]};
    s = merge(s, batch_moments(v));
  }
  return s;
}

// The channel (within the row's group) of vector k of a row, k / hv, followed as k advances by a fixed
// stride: one division when it starts, none a step. ON == false: no channel is needed, nothing kept.
template <bool ON>
struct ChannelWalk {
  long long c = 0, r = 0, dc = 0, dr = 0, hv = 1;
  __device__ __forceinline__ ChannelWalk(long long k, long long stride, long long hv_) {
    if constexpr (ON) {
      hv = hv_;
      c = k / hv;
      r = k % hv;
      dc = stride / hv;
      dr = stride % hv;
    }
  }
  __device__ __forceinline__ void step() {
    if constexpr (ON) {
      c += dc;
      r += dr;
      if (r >= hv) {
        r -= hv;
        ++c;
      }
    }
  }
};

// Per-channel inputs of the output pass. c0: the row's first channel.
template <typename T>
struct Affine {
  const T* w;
  const T* b;
  const float* rm;
  const float* rv;
  long long c0;
  float eps;
};

// One output vector: (x - mean) * (rstd * w[c]) + b[c], rounded once to T. With running stats, mean and
// rstd are channel c's.
template <int STATS, bool HAS_W, bool HAS_B, typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> normalise(const Vec<T, VEC>& v, float mean, float rstd, const Affine<T>& a,
                                                 long long c) {
  float m = mean, scale = rstd, shift = 0.f;
  if constexpr (STATS == kGroupNormRunningStats) {
    m = a.rm[a.c0 + c];
    scale = rsqrtf(a.rv[a.c0 + c] + a.eps);
  }
  if constexpr (HAS_W) scale *= to_float(a.w[a.c0 + c]);
  if constexpr (HAS_B) shift = to_float(a.b[a.c0 + c]);
  Vec<T, VEC> out;
#pragma unroll
  for (int e = 0; e < VEC; ++e) out.v[e] = from_float<T>(fmaf(to_float(v.v[e]) - m, scale, shift));
  return out;
}

// The output pass over vectors k, k + STRIDE, ... below `end` of a row, four loads in flight.
template <int STATS, bool HAS_W, bool HAS_B, int STRIDE, typename T, int VEC>
__device__ __forceinline__ void write_range(const Vec<T, VEC>* __restrict__ xr, Vec<T, VEC>* __restrict__ yr,
                                            long long k, long long end, long long hv, float mean, float rstd,
                                            const Affine<T>& a) {
  ChannelWalk<HAS_W || HAS_B || STATS == kGroupNormRunningStats> ch(k, STRIDE, hv);
  for (; k + 3 * STRIDE < end; k += 4 * STRIDE) {
    Vec<T, VEC> v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = xr[k + u * STRIDE];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      yr[k + u * STRIDE] = normalise<STATS, HAS_W, HAS_B>(v[u], mean, rstd, a, ch.c);
      ch.step();
    }
  }
  for (; k < end; k += STRIDE) {
    yr[k] = normalise<STATS, HAS_W, HAS_B>(xr[k], mean, rstd, a, ch.c);
    ch.step();
  }
}

}  // namespace group_norm_detail

// grid: ceil(rows / ROWS) CTAs of TPR * ROWS threads (TPR a power of two; ROWS > 1 only when TPR <= 32).
template <typename T, int VEC, int TPR, int ROWS, int CACHE, int STATS, bool HAS_W, bool HAS_B>
__global__ void __launch_bounds__(TPR * ROWS)
group_norm_fwd_rows(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                    const float* __restrict__ rm, const float* __restrict__ rv, T* __restrict__ y, long long rows,
                    long long groups, long long cpg, long long hv, float eps) {
  using namespace group_norm_detail;
  using V = Vec<T, VEC>;
  static_assert(ROWS == 1 || TPR <= 32, "a row wider than a warp owns its CTA");
  static_assert(CACHE == 0 || STATS == kGroupNormInputStats, "running stats need no registers");
  const int t = threadIdx.x % TPR;
  const long long row = static_cast<long long>(blockIdx.x) * ROWS + threadIdx.x / TPR;
  const bool active = row < rows;  // the threads of a missing row still join their row's shuffles
  const long long lv = cpg * hv;   // vectors a row
  const long long base = (active ? row : 0) * lv;
  const V* xr = reinterpret_cast<const V*>(x) + base;
  V* yr = reinterpret_cast<V*>(y) + base;
  const Affine<T> aff{w, b, rm, rv, (active ? row : 0) % groups * cpg, eps};
  const float count = static_cast<float>(lv * VEC);

  if constexpr (CACHE > 0) {
    __shared__ float scratch[TPR > 32 ? TPR / 32 : 1];
    V cache[CACHE];
    // Every load is issued before the first use.
#pragma unroll
    for (int i = 0; i < CACHE; ++i) {
      const long long k = static_cast<long long>(i) * TPR + t;
      if (active && k < lv) cache[i] = xr[k];
    }
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < CACHE; ++i) {
      const long long k = static_cast<long long>(i) * TPR + t;
      if (active && k < lv) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) sum += to_float(cache[i].v[e]);
      }
    }
    const float mean = group_sum<TPR>(sum, scratch) / count;
    if constexpr (TPR > 32) __syncthreads();  // scratch is reused by the second sum
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < CACHE; ++i) {
      const long long k = static_cast<long long>(i) * TPR + t;
      if (active && k < lv) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float d = to_float(cache[i].v[e]) - mean;
          sq = fmaf(d, d, sq);
        }
      }
    }
    const float rstd = rsqrtf(group_sum<TPR>(sq, scratch) / count + eps);
    ChannelWalk<HAS_W || HAS_B> ch(t, TPR, hv);
#pragma unroll
    for (int i = 0; i < CACHE; ++i) {
      const long long k = static_cast<long long>(i) * TPR + t;
      if (active && k < lv) yr[k] = normalise<STATS, HAS_W, HAS_B>(cache[i], mean, rstd, aff, ch.c);
      ch.step();
    }
  } else {
    float mean = 0.f, rstd = 0.f;
    if constexpr (STATS == kGroupNormInputStats) {
      __shared__ Moments scratch[TPR > 32 ? TPR / 32 : 1];
      Moments s{0.f, 0.f, 0.f};
      if (active) s = thread_moments<T, VEC, TPR>(xr, t, lv);
      s = group_reduce<TPR>(s, scratch, MergeMoments{});
      mean = s.mean;
      rstd = rsqrtf(s.m2 / count + eps);
    }
    write_range<STATS, HAS_W, HAS_B, TPR>(xr, yr, t, active ? lv : 0, hv, mean, rstd, aff);
  }
}

// The first pass of a split row: CTA (row, split) of `splits` reduces vectors [split * chunk,
// (split + 1) * chunk) of its row into ws[row * splits + split]. grid: rows * splits CTAs of TPB threads.
template <typename T, int VEC, int TPB>
__global__ void __launch_bounds__(TPB)
group_norm_fwd_stats(const T* __restrict__ x, void* __restrict__ ws, long long lv, int splits, long long chunk) {
  using namespace group_norm_detail;
  static_assert(TPB % 32 == 0 && TPB >= 64, "whole warps, more than one");
  __shared__ Moments scratch[TPB / 32];
  const long long cta = blockIdx.x;
  const long long row = cta / splits;
  const long long split = cta % splits;
  const long long begin = split * chunk;
  const long long end = begin + chunk < lv ? begin + chunk : lv;
  const Vec<T, VEC>* xr = reinterpret_cast<const Vec<T, VEC>*>(x) + row * lv;
  Moments s = thread_moments<T, VEC, TPB>(xr, begin + threadIdx.x, end);
  s = group_reduce<TPB>(s, scratch, MergeMoments{});
  if (threadIdx.x == 0) reinterpret_cast<Moments*>(ws)[row * splits + split] = s;
}

// The output pass of a split row (and, with running stats, the whole op for long rows): CTA
// (row, split) writes its chunk. With the input's stats, warp 0 first merges the row's `splits`
// moments; every CTA of the row merges them in the same order and gets the same mean and rstd.
template <typename T, int VEC, int TPB, int STATS, bool HAS_W, bool HAS_B>
__global__ void __launch_bounds__(TPB)
group_norm_fwd_apply(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                     const float* __restrict__ rm, const float* __restrict__ rv, const void* __restrict__ ws,
                     T* __restrict__ y, long long groups, long long cpg, long long hv, int splits, long long chunk,
                     float eps) {
  using namespace group_norm_detail;
  static_assert(TPB % 32 == 0, "whole warps");
  const long long cta = blockIdx.x;
  const long long row = cta / splits;
  const long long split = cta % splits;
  const long long lv = cpg * hv;
  const long long begin = split * chunk;
  const long long end = begin + chunk < lv ? begin + chunk : lv;
  float mean = 0.f, rstd = 0.f;
  if constexpr (STATS == kGroupNormInputStats) {
    __shared__ float stats[2];
    if (threadIdx.x < 32) {  // all of warp 0: its shuffles take every lane
      const Moments* part = reinterpret_cast<const Moments*>(ws) + row * splits;
      Moments s{0.f, 0.f, 0.f};
      for (int k = threadIdx.x; k < splits; k += 32) s = merge(s, part[k]);
      s = group_reduce<32>(s, static_cast<Moments*>(nullptr), MergeMoments{});
      if (threadIdx.x == 0) {
        stats[0] = s.mean;
        stats[1] = rsqrtf(s.m2 / static_cast<float>(lv * VEC) + eps);
      }
    }
    __syncthreads();
    mean = stats[0];
    rstd = stats[1];
  }
  const Affine<T> aff{w, b, rm, rv, row % groups * cpg, eps};
  write_range<STATS, HAS_W, HAS_B, TPB>(reinterpret_cast<const Vec<T, VEC>*>(x) + row * lv,
                                        reinterpret_cast<Vec<T, VEC>*>(y) + row * lv, begin + threadIdx.x, end, hv,
                                        mean, rstd, aff);
}

}  // namespace tileops

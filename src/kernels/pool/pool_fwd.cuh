// Pooling over the trailing R (1, 2 or 3) dims of a contiguous [planes, *in] input into a contiguous
// [planes, *out] output: avg_pool{1,2,3}d, max_pool{1,2,3}d and, with ADAPTIVE, the adaptive pools.
// pool_fwd: one thread an output element, or two neighbouring ones along the last dim (max pools with
// a fixed window, on rows the plan finds long enough), grid-stride; pool_fwd_wide: pools whose fixed window's neighbouring outputs
// read one 16-byte vector of a row (the resnet stem's 3x3, stride 2); pool_fwd_warp: 8 to
// 32 lanes an output, for windows of 32+ taps in a row. Index math in I: long long, or int where
// the plan saw every index and product
// stay below 2^31 (pool_index_bits); with int, an output index splits into its coordinates by
// multiply-high dividers made on the host (int_divider.cuh), not by divisions.
// W: PoolWindow<...> bakes a small window's kernel, stride, padding and dilation into the code (taps
// unrolled; checked against the input's bounds only where the window does not lie inside it), or
// PoolWindowOfCall reads them from the geometry and loops over the clipped window. Window per dim:
//   pooled   start = o * stride - pad, taps start + i * dil for i < kernel, clipped to [0, in)
//   adaptive [floor(o * in / out), ceil((o + 1) * in / out)), step 1
// avg sums in float32 and divides once: divisor_override when nonzero, else (count_include_pad)
// the window clipped to the padded input, else the window clipped to the input; an adaptive bin
// divides by its size. max takes the largest in float32 (exact for every storage type) and lets a
// NaN win, as torch does (a canonical NaN out; of +0 and -0, either); a window with no tap gives -inf.
// A fixed window whose taps all lie inside the input (most outputs) runs without a check a tap.
#pragma once
#include "common/dtypes.cuh"
#include "common/fast_math.cuh"
#include "common/int_divider.cuh"
#include "common/op_ids.cuh"

namespace tileops {

// Spatial geometry, the op's R dims last (dims before 3 - R are unused). Mirrored on the host by
// PoolGeometry in src/targets/nvrtc/pool/pool.h: same fields, same order, all 64-bit.
struct PoolGeometry {
  long long in[3];
  long long out[3];
  long long kernel[3];
  long long stride[3];
  long long pad[3];
  long long dil[3];
};

template <typename I>
__device__ __forceinline__ I pool_min(I a, I b) { return a < b ? a : b; }
template <typename I>
__device__ __forceinline__ I pool_max(I a, I b) { return a > b ? a : b; }

// The output dims' dividers (dims before 3 - R unused), for the int index path.
struct PoolDividers {
  IntDivider out[3];
};

// A window fixed in the kernel's code: kernel, stride, padding and dilation of dims 0..2 (the op's R
// dims last, 1, 1, 0, 1 before them).
template <int K0, int K1, int K2, int S0, int S1, int S2, int P0, int P1, int P2, int D0, int D1, int D2>
struct PoolWindow {
  static constexpr bool kFixed = true;
  __device__ static constexpr int kernel(int j) { return j == 0 ? K0 : j == 1 ? K1 : K2; }
  __device__ static constexpr int stride(int j) { return j == 0 ? S0 : j == 1 ? S1 : S2; }
  __device__ static constexpr int pad(int j) { return j == 0 ? P0 : j == 1 ? P1 : P2; }
  __device__ static constexpr int dil(int j) { return j == 0 ? D0 : j == 1 ? D1 : D2; }
};
// The window read from the call's PoolGeometry.
struct PoolWindowOfCall {
  static constexpr bool kFixed = false;
};

// Outputs a thread: 2 for a max pool with a fixed window (neighbours along the last dim), else 1.
template <int MODE, class W>
__device__ constexpr int pool_outputs_a_thread() {
  return MODE == kPoolMax && W::kFixed ? 2 : 1;
}

// fn(k, element) for each tap of output k (0: from `start`, 1: its neighbour along the last dim, when
// `two`), as pool_fixed_taps; a tap both windows cover is read once (the same address: the compiler
// keeps one load).
template <class W, int F, bool CHECK, typename T, typename I, class Fn>
__device__ __forceinline__ void pool_fixed_pair_taps(const T* base, const I (&start)[3], const I (&in)[3], bool two,
                                                     Fn&& fn) {
#pragma unroll
  for (int a = 0; a < W::kernel(0); ++a) {
    const I ia = start[0] + a * W::dil(0);
    if (CHECK && F == 0 && (ia < 0 || ia >= in[0])) continue;
#pragma unroll
    for (int b = 0; b < W::kernel(1); ++b) {
      const I ib = start[1] + b * W::dil(1);
      if (CHECK && F <= 1 && (ib < 0 || ib >= in[1])) continue;
      const T* row = base + (ia * in[1] + ib) * in[2];
#pragma unroll
      for (int c = 0; c < W::kernel(2); ++c) {
        const I ic = start[2] + c * W::dil(2), ic2 = ic + W::stride(2);
        if (!CHECK || (ic >= 0 && ic < in[2])) fn(0, row[ic]);
        if (!CHECK || (two && ic2 >= 0 && ic2 < in[2])) fn(1, row[ic2]);
      }
    }
  }
}

// Whether every tap of the fixed window from `start` lies inside the input.
template <class W, int F, typename I>
__device__ __forceinline__ bool pool_window_inside(const I (&start)[3], const I (&in)[3]) {
  bool inside = true;
#pragma unroll
  for (int j = F; j < 3; ++j) inside = inside && start[j] >= 0 && start[j] + (W::kernel(j) - 1) * W::dil(j) < in[j];
  return inside;
}

// fn(at, element) for each tap of a fixed window W in row-major order, unrolled, from the window's
// first corner `start`; `at` is the tap's index within its plane. CHECK: skip taps outside the
// input; without it the caller saw the whole window inside (no predicate a tap). Dims before F are 1
// wide: never checked.
template <class W, int F, bool CHECK, typename T, typename I, class Fn>
__device__ __forceinline__ void pool_fixed_taps(const T* base, const I (&start)[3], const I (&in)[3], Fn&& fn) {
#pragma unroll
  for (int a = 0; a < W::kernel(0); ++a) {
    const I ia = start[0] + a * W::dil(0);
    if (CHECK && F == 0 && (ia < 0 || ia >= in[0])) continue;
#pragma unroll
    for (int b = 0; b < W::kernel(1); ++b) {
      const I ib = start[1] + b * W::dil(1);
      if (CHECK && F <= 1 && (ib < 0 || ib >= in[1])) continue;
      const I r = (ia * in[1] + ib) * in[2];
      const T* row = base + r;
#pragma unroll
      for (int c = 0; c < W::kernel(2); ++c) {
        const I ic = start[2] + c * W::dil(2);
        if (CHECK && (ic < 0 || ic >= in[2])) continue;
        fn(r + ic, row[ic]);
      }
    }
  }
}

// The geometry in the kernel's index type, a fixed window's values from its code.
template <typename I>
struct PoolDims {
  I in[3], out[3], kernel[3], stride[3], pad[3], dil[3];
};
template <typename I, class W>
__device__ __forceinline__ PoolDims<I> pool_dims(const PoolGeometry& geometry) {
  PoolDims<I> g;
#pragma unroll
  for (int j = 0; j < 3; ++j) {
    g.in[j] = static_cast<I>(geometry.in[j]);
    g.out[j] = static_cast<I>(geometry.out[j]);
    if constexpr (W::kFixed) {
      g.kernel[j] = W::kernel(j);
      g.stride[j] = W::stride(j);
      g.pad[j] = W::pad(j);
      g.dil[j] = W::dil(j);
    } else {
      g.kernel[j] = static_cast<I>(geometry.kernel[j]);
      g.stride[j] = static_cast<I>(geometry.stride[j]);
      g.pad[j] = static_cast<I>(geometry.pad[j]);
      g.dil[j] = static_cast<I>(geometry.dil[j]);
    }
  }
  return g;
}

// Where a work item's window lies: its plane, its first output, and per dim the window's first tap
// (start) and, where the loops need them, its taps [lo, hi) in steps of st.
template <typename I>
struct PoolSite {
  I plane;        // n * C + c
  I first, last;  // the (first) output's index, and its coordinate in the last dim
  I start[3], lo[3], hi[3], st[3];
  long long padded;  // the window clipped to the padded input (count_include_pad's divisor)
};

// Work item idx of P outputs along the last dim (row_units of them a row) split into its coordinates.
template <typename I, int R, int MODE, bool ADAPTIVE, class W, int P>
__device__ __forceinline__ PoolSite<I> pool_locate(I idx, const PoolDims<I>& g, I row_units,
                                                   const PoolDividers& dividers) {
  constexpr int F = 3 - R;  // first dim used
  PoolSite<I> s{0, idx, 0, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, 1};
  I rest = idx;
#pragma unroll
  for (int j = 2; j >= F; --j) {
    const I d = j == 2 ? row_units : g.out[j];
    I q;
    if constexpr (sizeof(I) == 4) {
      q = static_cast<I>(int_divide(static_cast<unsigned>(rest), dividers.out[j]));
    } else {
      q = rest / d;
    }
    const I o = (rest - q * d) * (j == 2 ? P : 1);
    if (j == 2) {
      s.first = q * g.out[2] + o;
      s.last = o;
    }
    rest = q;
    if (ADAPTIVE) {
      if constexpr (sizeof(I) == 4) {  // by the dim's divider: P is 1, numerators below 2^31 (pool_index_bits)
        s.lo[j] = static_cast<I>(int_divide(static_cast<unsigned>(o * g.in[j]), dividers.out[j]));
        s.hi[j] = static_cast<I>(int_divide(static_cast<unsigned>((o + 1) * g.in[j] + g.out[j] - 1), dividers.out[j]));
      } else {
        s.lo[j] = o * g.in[j] / g.out[j];
        s.hi[j] = ((o + 1) * g.in[j] + g.out[j] - 1) / g.out[j];
      }
    } else {
      s.start[j] = o * g.stride[j] - g.pad[j];
      if (MODE == kPoolAvg) {
        const I end = pool_min<I>(s.start[j] + g.kernel[j], g.in[j] + g.pad[j]);
        s.padded *= end - s.start[j];
        s.lo[j] = pool_max<I>(s.start[j], 0);
        s.hi[j] = pool_min<I>(end, g.in[j]);
      } else if (!W::kFixed) {
        // first tap at or after 0 (torch steps start by dil while negative); taps end past the last
        s.lo[j] = s.start[j] < 0 ? s.start[j] + (-s.start[j] + g.dil[j] - 1) / g.dil[j] * g.dil[j] : s.start[j];
        s.hi[j] = pool_min<I>(s.start[j] + (g.kernel[j] - 1) * g.dil[j] + 1, g.in[j]);
        s.st[j] = g.dil[j];
      }
    }
  }
  s.plane = rest;
  return s;
}

// The taps an avg window sums (0: none, torch writes 0), a product of window sizes that may pass
// 2^31 where each index does not.
template <int F, typename I>
__device__ __forceinline__ long long pool_avg_count(const PoolSite<I>& s) {
  long long count = 1;
#pragma unroll
  for (int j = F; j < 3; ++j) count *= s.hi[j] > s.lo[j] ? s.hi[j] - s.lo[j] : 0;
  return count;
}
// What an avg window's sum is divided by.
template <bool ADAPTIVE>
__device__ __forceinline__ long long pool_avg_divisor(long long count, long long padded, int count_include_pad,
                                                      long long divisor_override) {
  if (ADAPTIVE) return count;
  return divisor_override != 0 ? divisor_override : count_include_pad ? padded : count;
}

// fn(idx, site, dims, plane_size) for each of this thread's work items (grid-stride), P outputs
// along the last dim an item: the walk pool_fwd, pool_fwd_wide and pool_max_indices_fwd share.
template <typename I, int R, int MODE, bool ADAPTIVE, class W, int P, class Fn>
__device__ __forceinline__ void pool_items(const PoolGeometry& geometry, long long units, const PoolDividers& dividers,
                                           Fn&& fn) {
  const PoolDims<I> g = pool_dims<I, W>(geometry);
  I plane_size = 1;
#pragma unroll
  for (int j = 3 - R; j < 3; ++j) plane_size *= g.in[j];
  const I row_units = (g.out[2] + P - 1) / P;
  const I step_all = static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
  for (I idx = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x); idx < units;
       idx += step_all)
    fn(idx, pool_locate<I, R, MODE, ADAPTIVE, W, P>(idx, g, row_units, dividers), g, plane_size);
}

// units: the outputs, or with P = 2 the pairs of neighbouring
// outputs along the last dim, ceil(out / 2) a row (pool_units on the host); dividers.out[2] divides by
// the units a row.
// P: outputs a thread (two: the window's taps that both windows cover are loaded once; the plan
// takes one on rows of few outputs).
template <typename T, typename I, int R, int MODE, bool ADAPTIVE, class W = PoolWindowOfCall,
          int P = pool_outputs_a_thread<MODE, W>()>
__global__ void pool_fwd(const T* __restrict__ x, T* __restrict__ y, long long units, PoolGeometry geometry,
                         PoolDividers dividers, int count_include_pad, long long divisor_override) {
  static_assert(R >= 1 && R <= 3, "pool_fwd pools 1, 2 or 3 trailing dims");
  static_assert(!(ADAPTIVE && W::kFixed), "adaptive bins have no fixed window");
  static_assert(P == 1 || P == pool_outputs_a_thread<MODE, W>(), "two outputs a thread: max pools, fixed windows");
  constexpr int F = 3 - R;  // first dim used
  pool_items<I, R, MODE, ADAPTIVE, W, P>(geometry, units, dividers, [&](I idx, const PoolSite<I>& s,
                                                                        const PoolDims<I>& g, I plane_size) {
    const T* base = x + s.plane * plane_size;
    const I in1 = g.in[1], in2 = g.in[2];
    if constexpr (MODE == kPoolAvg) {
      float sum = 0.f;
      const long long count = pool_avg_count<F>(s);
      if (count == 0) {  // no element of the input in the window: torch writes 0
        y[idx] = from_float<T>(0.f);
        return;
      }
      if constexpr (W::kFixed) {
        // taps outside the input add nothing (the count above excludes them)
        auto add = [&](I, const T v) { sum += to_float(v); };
        if (pool_window_inside<W, F>(s.start, g.in)) pool_fixed_taps<W, F, false>(base, s.start, g.in, add);
        else pool_fixed_taps<W, F, true>(base, s.start, g.in, add);
      } else {
        for (I a = s.lo[0]; a < s.hi[0]; ++a)
          for (I b = s.lo[1]; b < s.hi[1]; ++b) {
            const T* row = base + (a * in1 + b) * in2;
            for (I c = s.lo[2]; c < s.hi[2]; ++c) sum += to_float(row[c]);
          }
      }
      const long long divisor = pool_avg_divisor<ADAPTIVE>(count, s.padded, count_include_pad, divisor_override);
      y[idx] = from_float<T>(sum / static_cast<float>(divisor));
    } else if constexpr (P == 2) {
      const bool two = s.last + 1 < g.out[2];
      float best[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)};
      auto take = [&](int k, const T v) { best[k] = fmax_nan(best[k], to_float(v)); };
      if (two && pool_window_inside<W, F>(s.start, g.in) &&
          s.start[2] + W::stride(2) + (W::kernel(2) - 1) * W::dil(2) < in2)
        pool_fixed_pair_taps<W, F, false>(base, s.start, g.in, true, take);
      else
        pool_fixed_pair_taps<W, F, true>(base, s.start, g.in, two, take);
      y[s.first] = from_float<T>(best[0]);
      if (two) y[s.first + 1] = from_float<T>(best[1]);
    } else {
      float best = -__int_as_float(0x7f800000);
      auto take = [&](I, const T v) { best = fmax_nan(best, to_float(v)); };
      if constexpr (W::kFixed) {
        if (pool_window_inside<W, F>(s.start, g.in)) pool_fixed_taps<W, F, false>(base, s.start, g.in, take);
        else pool_fixed_taps<W, F, true>(base, s.start, g.in, take);
      } else {
        for (I a = s.lo[0]; a < s.hi[0]; a += s.st[0])
          for (I b = s.lo[1]; b < s.hi[1]; b += s.st[1]) {
            const T* row = base + (a * in1 + b) * in2;
            for (I c = s.lo[2]; c < s.hi[2]; c += s.st[2]) take(0, row[c]);
          }
      }
      y[idx] = from_float<T>(best);
    }
  });
}

// Pools with a fixed window W that slides along the last dim by S = W::stride(2) (dilation 1) where
// P = V / S outputs span V elements (V: one 16-byte vector): a work item takes P neighbouring
// outputs along the last dim. Their taps in an input row start PAD = W::pad(2) elements before the
// aligned vector at P * S * (item's place in the row) and end TAIL = K - PAD - S elements past it
// (0 when K - PAD <= S), so a row is PAD + TAIL element loads and one vector load (the plan checks
// x's and each row's 16-byte alignment); the PAD and TAIL elements are the neighbouring items'
// vectors, read again from L1; the P outputs are one store where aligned. Taps outside the input are
// -inf for max and 0 for avg; windows, sum order, divisors, NaN rule and empty-window results are
// pool_fwd's. Work items: ceil(out / P) a row (pool_units with P).
template <typename T, typename I, int R, int MODE, class W>
__global__ void pool_fwd_wide(const T* __restrict__ x, T* __restrict__ y, long long units, PoolGeometry geometry,
                              PoolDividers dividers, int count_include_pad, long long divisor_override) {
  static_assert(R >= 1 && R <= 3, "pool_fwd_wide pools 1, 2 or 3 trailing dims");
  constexpr int F = 3 - R;
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  constexpr int S = W::stride(2), K = W::kernel(2), PAD = W::pad(2);
  constexpr int P = V / S;
  constexpr int TAIL = K - PAD > S ? K - PAD - S : 0;
  static_assert(W::kFixed && W::dil(2) == 1 && P * S == V && PAD < V && TAIL < V,
                "pool_fwd_wide: the P windows of a vector's outputs lie in PAD elements, the vector and TAIL");
  const float empty = MODE == kPoolAvg ? 0.f : -__int_as_float(0x7f800000);
  pool_items<I, R, MODE, false, W, P>(geometry, units, dividers, [&](I, const PoolSite<I>& s, const PoolDims<I>& g,
                                                                     I plane_size) {
    const T* base = x + s.plane * plane_size;
    const I in1 = g.in[1], in2 = g.in[2];
    const I v0 = s.start[2] + PAD;  // the vector's first element: s.last * S, a multiple of V
    const bool whole = v0 + V <= in2;  // else the row's last vector is cut short: element loads
    float acc[P];
#pragma unroll
    for (int k = 0; k < P; ++k) acc[k] = empty;
#pragma unroll
    for (int a = 0; a < W::kernel(0); ++a) {
      const I ia = s.start[0] + a * W::dil(0);
      if (F == 0 && (ia < 0 || ia >= g.in[0])) continue;
#pragma unroll
      for (int b = 0; b < W::kernel(1); ++b) {
        const I ib = s.start[1] + b * W::dil(1);
        if (F <= 1 && (ib < 0 || ib >= in1)) continue;
        const T* row = base + (ia * in1 + ib) * in2;
        float span[PAD + V + TAIL];  // the row's elements v0 - PAD .. v0 + V + TAIL - 1
#pragma unroll
        for (int j = 0; j < PAD; ++j) {
          const I c = v0 - PAD + j;
          span[j] = c >= 0 && c < in2 ? to_float(row[c]) : empty;
        }
        if (whole) {
          const Vec<T, V> v = *reinterpret_cast<const Vec<T, V>*>(row + v0);
#pragma unroll
          for (int j = 0; j < V; ++j) span[PAD + j] = to_float(v.v[j]);
        } else {
#pragma unroll
          for (int j = 0; j < V; ++j) span[PAD + j] = v0 + j < in2 ? to_float(row[v0 + j]) : empty;
        }
#pragma unroll
        for (int j = 0; j < TAIL; ++j) span[PAD + V + j] = v0 + V + j < in2 ? to_float(row[v0 + V + j]) : empty;
#pragma unroll
        for (int k = 0; k < P; ++k)
#pragma unroll
          for (int t = 0; t < K; ++t)
            acc[k] = MODE == kPoolAvg ? acc[k] + span[k * S + t] : fmax_nan(acc[k], span[k * S + t]);
      }
    }
    Vec<T, P> out;
    if constexpr (MODE == kPoolAvg) {
      // the dims before the last are the P outputs' alike; along the last each clips its own window
      long long count = 1, padded = 1;
#pragma unroll
      for (int j = F; j < 2; ++j) {
        count *= s.hi[j] > s.lo[j] ? s.hi[j] - s.lo[j] : 0;
        padded *= pool_min<I>(s.start[j] + W::kernel(j), g.in[j] + W::pad(j)) - s.start[j];
      }
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const I start = s.start[2] + k * S, end = pool_min<I>(start + K, in2 + PAD);
        const I taps = pool_min<I>(end, in2) - pool_max<I>(start, 0);
        const long long n = count * (taps > 0 ? taps : 0);
        const long long divisor = pool_avg_divisor<false>(n, padded * (end - start), count_include_pad,
                                                          divisor_override);
        out.v[k] = from_float<T>(n == 0 ? 0.f : acc[k] / static_cast<float>(divisor));
      }
    } else {
#pragma unroll
      for (int k = 0; k < P; ++k) out.v[k] = from_float<T>(acc[k]);
    }
    // the P outputs in one store where they are whole and aligned (rows of a multiple of P outputs)
    if (s.last + P <= g.out[2] && reinterpret_cast<unsigned long long>(y + s.first) % sizeof(Vec<T, P>) == 0) {
      *reinterpret_cast<Vec<T, P>*>(y + s.first) = out;
    } else {
#pragma unroll
      for (int k = 0; k < P; ++k)
        if (s.last + k < g.out[2]) y[s.first + k] = out.v[k];
    }
  });
}

// G lanes an output (8, 16 or 32), for windows of at least 32 taps in a row (pool_wide_window on the
// host), where a thread an output would read 32+ taps alone, its warp's reads strided apart: the
// group's lanes split the window's taps along the last dim (coalesced), then combine by butterfly.
// Trailing dims a window covers whole with step 1 join that run, so a global pool reads each plane
// as one row. A warp pools 32 / G outputs at once (G from the run's length on the host): fewer lanes
// an output keep more outputs' loads in flight and repeat the index math for fewer. Same windows,
// divisors and NaN rule as pool_fwd.
template <typename T, typename I, int R, int MODE, bool ADAPTIVE, int G>
__global__ void pool_fwd_warp(const T* __restrict__ x, T* __restrict__ y, long long outputs, PoolGeometry geometry,
                              PoolDividers dividers, int count_include_pad, long long divisor_override) {
  static_assert(R >= 1 && R <= 3, "pool_fwd_warp pools 1, 2 or 3 trailing dims");
  static_assert(G == 8 || G == 16 || G == 32, "pool_fwd_warp takes 8, 16 or 32 lanes an output");
  constexpr int F = 3 - R;
  constexpr int kGroups = 32 / G;  // outputs a warp at once
  const PoolDims<I> g = pool_dims<I, PoolWindowOfCall>(geometry);
  I plane_size = 1;
#pragma unroll
  for (int j = F; j < 3; ++j) plane_size *= g.in[j];
  const int lane = static_cast<int>(threadIdx.x) % G;
  const I warps_a_cta = static_cast<I>(blockDim.x) / 32;
  const I step = static_cast<I>(gridDim.x) * warps_a_cta * kGroups;
  // the loop runs alike for the warp's groups (a group past the end pools nothing): shuffles see every lane
  for (I first = (static_cast<I>(blockIdx.x) * warps_a_cta + static_cast<I>(threadIdx.x) / 32) * kGroups;
       first < outputs; first += step) {
    const I idx = first + static_cast<I>(threadIdx.x % 32) / G;
    const bool live = idx < outputs;
    const PoolSite<I> s =
        pool_locate<I, R, MODE, ADAPTIVE, PoolWindowOfCall, 1>(live ? idx : first, g, g.out[2], dividers);
    const T* base = x + s.plane * plane_size;
    const I in1 = g.in[1], in2 = g.in[2];
    // the run the lanes split: dim 2's taps, or (dim 2 whole) dims 1-2's, or (dims 1-2 whole) dims 0-2's
    I alo = s.lo[0], ahi = s.hi[0], ast = s.st[0], blo = s.lo[1], bhi = s.hi[1], bst = s.st[1];
    I rlo = s.lo[2], rhi = s.hi[2], rst = s.st[2];
    if (s.lo[2] == 0 && s.hi[2] == in2 && rst == 1 && bst == 1) {
      rlo = blo * in2;
      rhi = bhi * in2;
      blo = 0;
      bhi = 1;
      if (s.lo[1] == 0 && s.hi[1] == in1 && ast == 1) {
        rlo = alo * in1 * in2;
        rhi = ahi * in1 * in2;
        alo = 0;
        ahi = 1;
      }
    }
    // taps of the run (none for a group past the end); t * rst stays below the window's extent
    // (bounded by pool_index_bits)
    const I taps = !live || rhi <= rlo ? 0 : rst == 1 ? rhi - rlo : (rhi - rlo + rst - 1) / rst;
    float acc = MODE == kPoolAvg ? 0.f : -__int_as_float(0x7f800000);
    for (I a = alo; a < ahi; a += ast)
      for (I b = blo; b < bhi; b += bst) {
        const T* row = base + (a * in1 + b) * in2 + rlo;
#pragma unroll 8  // loads in flight together
        for (I t = lane; t < taps; t += G) {
          const float v = to_float(row[t * rst]);
          acc = MODE == kPoolAvg ? acc + v : fmax_nan(acc, v);
        }
      }
#pragma unroll
    for (int offset = G / 2; offset > 0; offset /= 2) {
      const float v = __shfl_xor_sync(0xffffffffu, acc, offset);
      acc = MODE == kPoolAvg ? acc + v : fmax_nan(acc, v);
    }
    if (lane != 0 || !live) continue;
    if constexpr (MODE == kPoolAvg) {
      const long long count = pool_avg_count<F>(s);
      y[idx] = from_float<T>(count == 0 ? 0.f  // no element of the input in the window: torch writes 0
                                        : acc / static_cast<float>(pool_avg_divisor<ADAPTIVE>(
                                                    count, s.padded, count_include_pad, divisor_override)));
    } else {
      y[idx] = from_float<T>(acc);
    }
  }
}

}  // namespace tileops

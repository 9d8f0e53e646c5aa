// The scan engine (cumsum, cumprod, logcumsumexp): x (contiguous) seen as [M, N, I] (outer, scanned, inner),
// y[m, n, i] = x[m, 0, i] op ... op x[m, n, i]. As torch: each element is first cast to y's type Y,
// then accumulated in A (float for float16/bfloat16/float32 Y, double for float64, long long for
// integer Y, whose wrap-around then matches a scan in Y) and every prefix is rounded once to Y.
//
// Kernels (the host side, src/targets/nvrtc/reduction/scan.cpp, picks one and its template arguments;
// rows require N % VEC == 0, VEC-aligned x and y pointers; columns I % VEC == 0):
//  - scan_rows (I == 1): TPR threads a row, ROWS rows a CTA. The row is walked in chunks of TPR * VEC
//    elements: each thread scans its VEC elements, the group scans the thread totals (shuffles, then
//    shared memory across warps) and a carry crosses chunks.
//  - scan_rows_chained (I == 1, few long rows): tiles of a row scanned by CTAs side by side in one
//    pass, each taking the prefix of the tiles before it by a decoupled look-back.
//  - scan_cols (I > 1): a thread owns VEC adjacent columns and walks n sequentially (a warp reads
//    32 * VEC adjacent elements of a row of x: coalesced). SPLIT: n is cut into `splits` slices,
//    each starting from the totals of the slices before it (scan_col_totals, then scan_col_carries).
#pragma once
#include "common/dtypes.cuh"
#include "common/op_ids.cuh"

namespace tileops {

namespace scan_detail {

template <typename A, typename B> struct same_type { static constexpr bool value = false; };
template <typename A> struct same_type<A, A> { static constexpr bool value = true; };

template <typename T> struct is_half { static constexpr bool value = false; };
template <> struct is_half<f16> { static constexpr bool value = true; };
template <> struct is_half<bf16> { static constexpr bool value = true; };

template <typename T> struct is_int { static constexpr bool value = true; };
template <> struct is_int<f16> { static constexpr bool value = false; };
template <> struct is_int<bf16> { static constexpr bool value = false; };
template <> struct is_int<float> { static constexpr bool value = false; };
template <> struct is_int<double> { static constexpr bool value = false; };

// The accumulator of an output type.
template <typename Y> struct Acc { using type = long long; };
template <> struct Acc<f16> { using type = float; };
template <> struct Acc<bf16> { using type = float; };
template <> struct Acc<float> { using type = float; };
template <> struct Acc<double> { using type = double; };

template <typename T> __device__ __forceinline__ float as_float(T v) {
  if constexpr (is_half<T>::value) return to_float(v);
  else return static_cast<float>(v);
}
template <typename T> __device__ __forceinline__ double as_double(T v) {
  if constexpr (is_half<T>::value) return static_cast<double>(to_float(v));
  else return static_cast<double>(v);
}
// Floating to integer truncates toward zero (through int64, as torch's casts on the CPU).
template <typename T> __device__ __forceinline__ long long as_long(T v) {
  if constexpr (is_half<T>::value) return static_cast<long long>(to_float(v));
  else return static_cast<long long>(v);
}

// torch's x.to(Y): float16/bfloat16 targets round from float32 (c10 converts through float).
template <typename Y, typename T> __device__ __forceinline__ Y cast(T v) {
  if constexpr (same_type<Y, T>::value) return v;
  else if constexpr (is_half<Y>::value) return from_float<Y>(as_float(v));
  else if constexpr (same_type<Y, float>::value) return as_float(v);
  else if constexpr (same_type<Y, double>::value) return as_double(v);
  else return static_cast<Y>(as_long(v));
}

template <typename A, typename Y> __device__ __forceinline__ A widen(Y v) {
  if constexpr (same_type<A, float>::value) return as_float(v);
  else if constexpr (same_type<A, double>::value) return as_double(v);
  else return as_long(v);
}

// One element of x as the scan adds it: cast to Y, then widened to A.
template <typename T, typename Y, typename A> __device__ __forceinline__ A element(T v) {
  return widen<A>(cast<Y>(v));
}

template <typename Y, typename A> __device__ __forceinline__ Y narrow(A a) {
  if constexpr (is_half<Y>::value) return from_float<Y>(a);
  else return static_cast<Y>(a);  // integer Y: the low bits, as a scan in Y would wrap
}

template <typename A> __device__ __forceinline__ A neg_inf() {
  if constexpr (same_type<A, double>::value) return __longlong_as_double(static_cast<long long>(0xfff0000000000000ull));
  else return __int_as_float(0xff800000);
}

template <int OP, typename A> __device__ __forceinline__ A identity() {
  if constexpr (OP == kScanLogSumExp) return neg_inf<A>();
  else return static_cast<A>(OP == kScanProd ? 1 : 0);
}

// log(exp(a) + exp(b)) as torch's logcumsumexp step: NaN propagates, the same infinity twice stays.
template <typename A> __device__ __forceinline__ A log_add_exp(A a, A b) {
  if (a != a || b != b) return a + b;
  const A mx = a > b ? a : b, mn = a > b ? b : a;
  if (mn == mx && mn - mn != mn - mn) return a;  // both +inf or both -inf: exp(mn - mx) would be NaN
  if constexpr (same_type<A, double>::value) return mx + log1p(exp(mn - mx));
  else return mx + log1pf(expf(mn - mx));
}

template <int OP, typename A> __device__ __forceinline__ A combine(A a, A b) {
  if constexpr (OP == kScanProd) return a * b;
  else if constexpr (OP == kScanLogSumExp) return log_add_exp(a, b);
  else return a + b;
}

// VEC elements of Y stored in accesses of at most 16 bytes (y needs alignment min(16, VEC * sizeof(Y))).
template <typename Y, int VEC> __device__ __forceinline__ void store_vec(Y* p, const Y (&v)[VEC]) {
  constexpr int W = (VEC * sizeof(Y) > 16) ? 16 / sizeof(Y) : VEC;
#pragma unroll
  for (int j = 0; j < VEC / W; ++j) {
    Vec<Y, W> w;
#pragma unroll
    for (int e = 0; e < W; ++e) w.v[e] = v[j * W + e];
    *reinterpret_cast<Vec<Y, W>*>(p + j * W) = w;
  }
}

// v combined across the 32 lanes of a warp, every lane getting the result (the ops commute).
template <int OP, typename A> __device__ __forceinline__ A warp_combine(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v = combine<OP>(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Inclusive scan of v across the TPR (<= 32) lanes of a segment of a warp.
template <int OP, int TPR, typename A> __device__ __forceinline__ A segment_scan(A v, int t) {
#pragma unroll
  for (int offset = 1; offset < TPR; offset *= 2) {
    const A u = __shfl_up_sync(0xffffffffu, v, offset, TPR);
    if (t >= offset) v = combine<OP>(u, v);
  }
  return v;
}

// The exclusive prefix of each thread's total within its TPR-thread group, and the group's total.
// TPR > 32: the group's warps meet in `warp_sums` (TPR / 32 entries of this group's own; every group
// of the CTA calls this together, as it holds a barrier); the caller syncs before reuse.
template <int OP, int TPR, typename A>
__device__ __forceinline__ A group_exclusive(A total, int t, A* warp_sums, A& group_total) {
  constexpr int kSeg = TPR < 32 ? TPR : 32;
  const int lane = t % kSeg;
  const A incl = segment_scan<OP, kSeg>(total, lane);
  A excl = __shfl_up_sync(0xffffffffu, incl, 1, kSeg);
  if (lane == 0) excl = identity<OP, A>();
  if constexpr (TPR <= 32) {
    group_total = __shfl_sync(0xffffffffu, incl, kSeg - 1, kSeg);
    return excl;
  } else {
    constexpr int kWarps = TPR / 32;
    const int warp = t / 32;
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    // Every warp scans the kWarps warp totals itself: no second barrier.
    A w = lane < kWarps ? warp_sums[lane] : identity<OP, A>();
    w = segment_scan<OP, 32>(w, lane);
    A before = __shfl_sync(0xffffffffu, w, warp > 0 ? warp - 1 : 0);
    if (warp == 0) before = identity<OP, A>();
    group_total = __shfl_sync(0xffffffffu, w, kWarps - 1);
    return combine<OP>(before, excl);
  }
}

}  // namespace scan_detail

// I == 1: row m of x is x[m*N, (m+1)*N). grid: ceil(M / ROWS) CTAs of TPR * ROWS threads.
template <typename T, typename Y, int OP, int VEC, int TPR, int ROWS>
__global__ void __launch_bounds__(TPR * ROWS) scan_rows(const T* __restrict__ x, Y* __restrict__ y, long long M,
                                                        long long N) {
  using A = typename scan_detail::Acc<Y>::type;
  constexpr int kWarps = TPR > 32 ? TPR / 32 : 1;
  __shared__ A all_warp_sums[ROWS * kWarps];
  const int t = threadIdx.x % TPR, r = threadIdx.x / TPR;
  A* warp_sums = all_warp_sums + r * kWarps;  // each row's own: rows of 64+ threads share a CTA
  const long long m = static_cast<long long>(blockIdx.x) * ROWS + r;
  const bool valid = m < M;  // rows past M still shuffle with their warp
  const long long begin = 0, end = N / VEC;
  A carry = scan_detail::identity<OP, A>();
  const Vec<T, VEC>* row = reinterpret_cast<const Vec<T, VEC>*>(x + (valid ? m : 0) * N);
  Y* out = y + (valid ? m : 0) * N;
  // The next chunk's vector is loaded before this chunk is scanned: one load always in flight.
  long long k = begin + t;
  Vec<T, VEC> next;
  if (valid && k < end) next = row[k];
  for (long long c0 = begin; c0 < end; c0 += TPR, k += TPR) {
    const Vec<T, VEC> v = next;
    const bool here = valid && k < end;
    if (valid && k + TPR < end) next = row[k + TPR];
    A p[VEC];
    A run = scan_detail::identity<OP, A>();
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (here) run = scan_detail::combine<OP>(run, scan_detail::element<T, Y, A>(v.v[e]));
      p[e] = run;
    }
    A chunk_total;
    const A before = scan_detail::group_exclusive<OP, TPR>(run, t, warp_sums, chunk_total);
    const A prefix = scan_detail::combine<OP>(carry, before);
    if (here) {
      Y o[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) o[e] = scan_detail::narrow<Y>(scan_detail::combine<OP>(prefix, p[e]));
      scan_detail::store_vec<Y, VEC>(out + k * VEC, o);
    }
    carry = scan_detail::combine<OP>(carry, chunk_total);
    if constexpr (TPR > 32) __syncthreads();  // warp_sums is rewritten by the next chunk
  }
}

// Few long rows (the split plan): one pass, tiles of TPR * IPT vectors claimed in order (tile k of
// the call: row k / tiles, tile k % tiles of that row, from an atomic counter, so every tile before
// it in its row is running or done: waiting on one cannot deadlock). A tile scans its vectors held in
// registers (IPT chunks, each as scan_rows's), publishes its aggregate, then its first warp looks
// back 32 tiles a round (one flag a lane, waiting until each has published something): a round with a
// published inclusive prefix ends the walk, aggregates after it are combined; it publishes its own
// inclusive prefix and the tile writes y from the prefix before it. x is read once.
// state: flag[M * tiles] (int, 0 on entry), agg[M * tiles], incl[M * tiles] (A), counter (long long,
// 0 on entry), laid out by scan_chain_state_bytes on the host. grid: M * tiles CTAs of TPR threads.
template <typename T, typename Y, int OP, int VEC, int TPR, int IPT>
__global__ void __launch_bounds__(TPR) scan_rows_chained(const T* __restrict__ x, Y* __restrict__ y,
                                                         void* __restrict__ state, long long M, long long N,
                                                         long long tiles) {
  static_assert(TPR >= 32 && TPR % 32 == 0, "the look-back takes a whole first warp");
  using A = typename scan_detail::Acc<Y>::type;
  __shared__ A warp_sums[TPR > 32 ? TPR / 32 : 1];
  __shared__ long long s_tile;
  __shared__ A s_prefix;
  const int t = threadIdx.x;
  const long long total = M * tiles;
  int* flag = reinterpret_cast<int*>(state);
  A* agg = reinterpret_cast<A*>(reinterpret_cast<char*>(state) + ((total * sizeof(int) + 15) / 16) * 16);
  A* incl = agg + total;
  unsigned long long* counter = reinterpret_cast<unsigned long long*>(incl + total);
  if (t == 0) s_tile = static_cast<long long>(atomicAdd(counter, 1ull));
  __syncthreads();
  const long long tile = s_tile;
  const long long m = tile / tiles, k = tile % tiles;
  const long long vecs = N / VEC;
  const long long begin = k * TPR * IPT;
  const Vec<T, VEC>* row = reinterpret_cast<const Vec<T, VEC>*>(x + m * N);
  Y* out = y + m * N;

  Vec<T, VEC> v[IPT];
#pragma unroll
  for (int i = 0; i < IPT; ++i) {  // every load in flight before the first use
    const long long c = begin + i * TPR + t;
    if (c < vecs) v[i] = row[c];
  }
  // p: each thread's own running values; pre[i]: what comes before them inside the tile. Both meet
  // the tile's prefix only at the store: one combination an element there, not two.
  A p[IPT][VEC];
  A pre[IPT];
  A carry = scan_detail::identity<OP, A>();
#pragma unroll
  for (int i = 0; i < IPT; ++i) {
    const bool here = begin + i * TPR + t < vecs;
    A run = scan_detail::identity<OP, A>();
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (here) run = scan_detail::combine<OP>(run, scan_detail::element<T, Y, A>(v[i].v[e]));
      p[i][e] = run;
    }
    A chunk_total;
    const A before = scan_detail::group_exclusive<OP, TPR>(run, t, warp_sums, chunk_total);
    pre[i] = scan_detail::combine<OP>(carry, before);
    carry = scan_detail::combine<OP>(carry, chunk_total);
    if constexpr (TPR > 32) __syncthreads();  // warp_sums is rewritten by the next chunk
  }

  if (t < 32) {  // warp 0 publishes this tile's state and looks back
    const long long row0 = m * tiles, at = row0 + k;
    A before = scan_detail::identity<OP, A>();
    if (k == 0) {
      if (t == 0) {
        incl[at] = carry;
        __threadfence();
        atomicExch(flag + at, 2);
      }
    } else {
      if (t == 0) {
        agg[at] = carry;
        __threadfence();
        atomicExch(flag + at, 1);
      }
      // 32 tiles a round, lane l reading tile top - l: the round ends at the nearest tile that has
      // published its inclusive prefix (tiles before the row count as such, with nothing to add)
      for (long long top = at - 1;; top -= 32) {
        const long long j = top - t;
        int f = 2;
        A seen = scan_detail::identity<OP, A>();
        if (j >= row0) {
          while ((f = atomicAdd(flag + j, 0)) == 0) {
          }
          __threadfence();
          seen = f == 2 ? *reinterpret_cast<volatile A*>(incl + j) : *reinterpret_cast<volatile A*>(agg + j);
        }
        const unsigned done = __ballot_sync(0xffffffffu, f == 2);
        if (done != 0 && t > __ffs(done) - 1) seen = scan_detail::identity<OP, A>();  // past the inclusive one
        before = scan_detail::combine<OP>(scan_detail::warp_combine<OP>(seen), before);
        if (done != 0) break;
      }
      if (t == 0) {
        incl[at] = scan_detail::combine<OP>(before, carry);
        __threadfence();
        atomicExch(flag + at, 2);
      }
    }
    if (t == 0) s_prefix = before;
  }
  __syncthreads();
  const A before = s_prefix;
#pragma unroll
  for (int i = 0; i < IPT; ++i) {
    const long long c = begin + i * TPR + t;
    if (c < vecs) {
      const A full = scan_detail::combine<OP>(before, pre[i]);
      Y o[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) o[e] = scan_detail::narrow<Y>(scan_detail::combine<OP>(full, p[i][e]));
      scan_detail::store_vec<Y, VEC>(out + c * VEC, o);
    }
  }
}

// I > 1: thread g of the M * I / VEC threads owns columns (m, i .. i + VEC) and walks n in
// [s*per, (s+1)*per) (SPLIT: slice s = blockIdx.x / xblocks; else the whole of n).
// grid: xblocks * splits CTAs, xblocks = ceil(M * I / VEC / 256).
template <typename T, typename Y, int OP, int VEC, bool SPLIT>
__global__ void __launch_bounds__(256) scan_cols(const T* __restrict__ x, Y* __restrict__ y,
                                                 const void* __restrict__ totals, long long M, long long N,
                                                 long long I, int splits) {
  using A = typename scan_detail::Acc<Y>::type;
  const long long lanes = I / VEC;
  const long long xblocks = (M * lanes + 255) / 256;
  const long long g = static_cast<long long>(blockIdx.x % xblocks) * 256 + threadIdx.x;
  if (g >= M * lanes) return;
  const long long m = g / lanes, i = (g % lanes) * VEC;
  const int split = SPLIT ? static_cast<int>(blockIdx.x / xblocks) : 0;
  const long long per = SPLIT ? (N + splits - 1) / splits : N;
  const long long n0 = split * per;
  const long long n1 = n0 + per < N ? n0 + per : N;
  A acc[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) acc[e] = scan_detail::identity<OP, A>();
  if constexpr (SPLIT) {  // totals[s * M * I + m * I + i]: the slices before this one (scan_col_carries)
    const A* carry = reinterpret_cast<const A*>(totals) + split * M * I + m * I + i;
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[e] = carry[e];
  }
  const T* src = x + m * N * I + i;
  Y* dst = y + m * N * I + i;
  long long n = n0;
  for (; n + 3 < n1; n += 4) {  // four rows of loads in flight before the dependent chain
    Vec<T, VEC> v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = *reinterpret_cast<const Vec<T, VEC>*>(src + (n + u) * I);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      Y o[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        acc[e] = scan_detail::combine<OP>(acc[e], scan_detail::element<T, Y, A>(v[u].v[e]));
        o[e] = scan_detail::narrow<Y>(acc[e]);
      }
      scan_detail::store_vec<Y, VEC>(dst + (n + u) * I, o);
    }
  }
  for (; n < n1; ++n) {
    const Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(src + n * I);
    Y o[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      acc[e] = scan_detail::combine<OP>(acc[e], scan_detail::element<T, Y, A>(v.v[e]));
      o[e] = scan_detail::narrow<Y>(acc[e]);
    }
    scan_detail::store_vec<Y, VEC>(dst + n * I, o);
  }
}

// The first pass of a split column scan: totals[s * M * I + m * I + i] = the combination of slice s.
template <typename T, typename Y, int OP, int VEC>
__global__ void __launch_bounds__(256) scan_col_totals(const T* __restrict__ x, void* __restrict__ totals, long long M,
                                                        long long N, long long I, int splits) {
  using A = typename scan_detail::Acc<Y>::type;
  const long long lanes = I / VEC;
  const long long xblocks = (M * lanes + 255) / 256;
  const long long g = static_cast<long long>(blockIdx.x % xblocks) * 256 + threadIdx.x;
  if (g >= M * lanes) return;
  const long long m = g / lanes, i = (g % lanes) * VEC;
  const int split = static_cast<int>(blockIdx.x / xblocks);
  const long long per = (N + splits - 1) / splits;
  const long long n0 = split * per;
  const long long n1 = n0 + per < N ? n0 + per : N;
  A acc[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) acc[e] = scan_detail::identity<OP, A>();
  const T* src = x + m * N * I + i;
  long long n = n0;
  for (; n + 3 < n1; n += 4) {
    Vec<T, VEC> v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = *reinterpret_cast<const Vec<T, VEC>*>(src + (n + u) * I);
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[e] = scan_detail::combine<OP>(acc[e], scan_detail::element<T, Y, A>(v[u].v[e]));
  }
  for (; n < n1; ++n) {
    const Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(src + n * I);
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[e] = scan_detail::combine<OP>(acc[e], scan_detail::element<T, Y, A>(v.v[e]));
  }
  A* out = reinterpret_cast<A*>(totals) + split * M * I + m * I + i;
#pragma unroll
  for (int e = 0; e < VEC; ++e) out[e] = acc[e];
}

// The middle pass of a split column scan: each of the M * I columns turns its slice totals into the
// combination of the slices before each one, in slice order, in place.
template <typename Y, int OP>
__global__ void __launch_bounds__(256) scan_col_carries(void* __restrict__ totals, long long cols, int splits) {
  using A = typename scan_detail::Acc<Y>::type;
  const long long c = static_cast<long long>(blockIdx.x) * 256 + threadIdx.x;
  if (c >= cols) return;
  A* t = reinterpret_cast<A*>(totals) + c;
  A run = scan_detail::identity<OP, A>();
  for (int s = 0; s < splits; ++s) {
    const A v = t[s * cols];
    t[s * cols] = run;
    run = scan_detail::combine<OP>(run, v);
  }
}

}  // namespace tileops

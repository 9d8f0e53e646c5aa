// The reduction engine: x (contiguous) seen as [M, N, I] (outer, reduced, inner), y[m, i] = the
// reduction of x[m, :, i], in float32, written once in y's type (torch's reductions with dtype=None,
// or with dtype= when C differs from T: each element is first rounded to C).
//
// Kernels (the host side, src/targets/nvrtc/reduction/reduce.cpp, picks one and its template
// arguments; it requires N % VEC == 0 and VEC-aligned pointers for rows, I % VEC == 0 for columns):
//  - reduce_rows (I == 1): TPR threads a row, ROWS rows a CTA; thread t reads vectors t, t + TPR, ...
//    SPLIT: the `splits` CTAs of a row each reduce a chunk into a partial state in `ws`.
//  - reduce_cols (I > 1): a warp's lanes own VEC adjacent columns each; the CTA's TY warps stride
//    over n and meet in shared memory. SPLIT: each CTA covers a chunk of n, into `ws`.
//  - reduce_finish: merges the partial states of each output (the second pass).
// Ops (kReduce*, common/op_ids.cuh; ReduceOp on the host takes its values from them) differ only in their
// state, how an element joins it, how two states merge and what is written.
#pragma once
#include "common/dtypes.cuh"
#include "common/fast_math.cuh"
#include "common/op_ids.cuh"
#include "common/reduce.cuh"

namespace tileops {

namespace reduce_detail {

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ bool is_nan(float v) { return v != v; }

// The NaN-propagating max (MAX) or min of K values, pairwise (log2 K deep, not a chain of K).
template <bool MAX, int K>
__device__ __forceinline__ float extreme_of(const float (&v)[K]) {
  float t[K];
#pragma unroll
  for (int j = 0; j < K; ++j) t[j] = v[j];
#pragma unroll
  for (int w = 1; w < K; w *= 2)
#pragma unroll
    for (int j = 0; j + w < K; j += 2 * w) t[j] = MAX ? fmax_nan(t[j], t[j + w]) : fmin_nan(t[j], t[j + w]);
  return t[0];
}

template <typename T> __device__ __forceinline__ void store(T* p, float v) { *p = from_float<T>(v); }
template <> __device__ __forceinline__ void store<long long>(long long* p, float v) { *p = static_cast<long long>(v); }
template <> __device__ __forceinline__ void store<bool>(bool* p, float v) { *p = v != 0.f; }

// The running state of one output per op, and its rules:
//   init()                 the state of no element
//   fold<K>(s, v, i0, step)  K elements v[j] (float32) at indices i0 + j * step along the reduced
//                          extent, all after the elements of s: the K are combined first, then
//                          joined to s once (a vector's work outside the per-element chain)
//   merge(a, b)            two states of disjoint parts (commutative: ties resolved by index)
//   write(s, n, corr, y, y2)  the result of n elements into the output(s)
template <int OP> struct Reducer;

template <int OP> struct SumLike {  // sum, mean, L1, L2, prod
  struct State { float v; };
  static __device__ __forceinline__ State init() { return {OP == kReduceProd ? 1.f : 0.f}; }
  static __device__ __forceinline__ float term(float v) {
    if constexpr (OP == kReduceL1) return fabsf(v);
    if constexpr (OP == kReduceL2) return v * v;
    return v;
  }
  static __device__ __forceinline__ State merge(State a, State b) {
    return {OP == kReduceProd ? a.v * b.v : a.v + b.v};
  }
  template <int K>
  static __device__ __forceinline__ State fold(State s, const float (&v)[K], long long, long long) {
    State t{term(v[0])};
#pragma unroll
    for (int j = 1; j < K; ++j) t = merge(t, {term(v[j])});
    return merge(s, t);
  }
  template <typename Y, typename Y2>
  static __device__ __forceinline__ void write(State s, long long n, float, Y* y, Y2*) {
    float r = s.v;
    if constexpr (OP == kReduceMean) r = s.v / static_cast<float>(n);  // n == 0: NaN, as torch
    if constexpr (OP == kReduceL2) r = sqrtf(s.v);
    store(y, r);
  }
};
template <> struct Reducer<kReduceSum> : SumLike<kReduceSum> {};
template <> struct Reducer<kReduceMean> : SumLike<kReduceMean> {};
template <> struct Reducer<kReduceProd> : SumLike<kReduceProd> {};
template <> struct Reducer<kReduceL1> : SumLike<kReduceL1> {};
template <> struct Reducer<kReduceL2> : SumLike<kReduceL2> {};

template <int OP> struct ExtremeLike {  // amax, amin, inf-norm: a NaN wins
  struct State { float v; };
  static __device__ __forceinline__ State init() { return {OP == kReduceAmin ? pos_inf() : neg_inf()}; }
  static __device__ __forceinline__ State merge(State a, State b) {
    return {OP == kReduceAmin ? fmin_nan(a.v, b.v) : fmax_nan(a.v, b.v)};
  }
  template <int K>
  static __device__ __forceinline__ State fold(State s, const float (&v)[K], long long, long long) {
    if constexpr (OP == kReduceInf) {
      float a[K];
#pragma unroll
      for (int j = 0; j < K; ++j) a[j] = fabsf(v[j]);
      return merge(s, {extreme_of<true>(a)});
    } else {
      return merge(s, {extreme_of<OP != kReduceAmin>(v)});
    }
  }
  template <typename Y, typename Y2>
  static __device__ __forceinline__ void write(State s, long long, float, Y* y, Y2*) { store(y, s.v); }
};
template <> struct Reducer<kReduceAmax> : ExtremeLike<kReduceAmax> {};
template <> struct Reducer<kReduceAmin> : ExtremeLike<kReduceAmin> {};
template <> struct Reducer<kReduceInf> : ExtremeLike<kReduceInf> {};

// argmax / argmin: the first extreme; a NaN counts as the extreme (the first NaN wins), as torch.
template <int OP> struct ArgLike {
  struct State { float v; int pad; long long i; };  // i < 0: no element yet
  // a beats b: greater (less), or a NaN over a number. !(a <= b) is "greater or unordered": bitwise,
  // two compares, no branches.
  static __device__ __forceinline__ bool beats(float a, float b) {
    return (OP == kReduceArgmax ? !(a <= b) : !(a >= b)) & (b == b);
  }
  static __device__ __forceinline__ State init() { return {0.f, 0, -1}; }
  template <int K>
  static __device__ __forceinline__ State fold(State s, const float (&v)[K], long long i0, long long step) {
    // the K's extreme (one NaN-propagating max or min an element), then the first position holding
    // it, or holding a NaN (the extreme is NaN only when one of the K is); then one comparison with
    // s, whose elements come first: a tie keeps s
    const float m = extreme_of<OP == kReduceArgmax>(v);
    int at = K - 1;
#pragma unroll
    for (int j = K - 2; j >= 0; --j) at = ((v[j] == m) | is_nan(v[j])) ? j : at;
    return ((s.i < 0) | beats(m, s.v)) ? State{m, 0, i0 + at * step} : s;
  }
  static __device__ __forceinline__ State merge(State a, State b) {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    if (beats(a.v, b.v)) return a;
    if (beats(b.v, a.v)) return b;
    return a.i < b.i ? a : b;
  }
  template <typename Y, typename Y2>
  static __device__ __forceinline__ void write(State s, long long, float, Y* y, Y2*) { *y = s.i; }
};
template <> struct Reducer<kReduceArgmax> : ArgLike<kReduceArgmax> {};
template <> struct Reducer<kReduceArgmin> : ArgLike<kReduceArgmin> {};

// all and any keep a 32-bit flag (a column lane holds twice the columns of a 64-bit count).
template <bool COUNT> struct logic_state { using type = int; };
template <> struct logic_state<true> { using type = long long; };

template <int OP> struct LogicLike {  // all, any, count_nonzero (NaN is nonzero)
  struct State { typename logic_state<OP == kReduceCountNonzero>::type c; };
  static __device__ __forceinline__ State init() { return {OP == kReduceAll ? 1 : 0}; }
  template <int K>
  static __device__ __forceinline__ State fold(State s, const float (&v)[K], long long, long long) {
    int nonzero = 0;  // counted in 32 bits, joined to the state once
#pragma unroll
    for (int j = 0; j < K; ++j) nonzero += v[j] != 0.f;
    if constexpr (OP == kReduceAll) return {s.c & (nonzero == K)};
    if constexpr (OP == kReduceAny) return {s.c | (nonzero != 0)};
    return {s.c + nonzero};
  }
  static __device__ __forceinline__ State merge(State a, State b) {
    if constexpr (OP == kReduceAll) return {a.c & b.c};
    if constexpr (OP == kReduceAny) return {a.c | b.c};
    return {a.c + b.c};
  }
  template <typename Y, typename Y2>
  static __device__ __forceinline__ void write(State s, long long, float, Y* y, Y2*) {
    if constexpr (OP == kReduceCountNonzero) *y = s.c;
    else *y = s.c != 0;
  }
};
template <> struct Reducer<kReduceAll> : LogicLike<kReduceAll> {};
template <> struct Reducer<kReduceAny> : LogicLike<kReduceAny> {};
template <> struct Reducer<kReduceCountNonzero> : LogicLike<kReduceCountNonzero> {};

// var, std, var_mean: Welford (count, mean, sum of squared deviations), merged by Chan's rule.
template <int OP> struct MomentLike {
  struct State { float n, mean, m2; };
  static __device__ __forceinline__ State init() { return {0.f, 0.f, 0.f}; }
  template <int K>
  static __device__ __forceinline__ State fold(State s, const float (&v)[K], long long, long long) {
    // the K's own mean and squared deviations, then Chan's merge: one division per K elements. Each
    // element is scaled before the sum, so values near the float range do not overflow the mean.
    float mean = 0.f;
#pragma unroll
    for (int j = 0; j < K; ++j) mean = fmaf(v[j], 1.f / K, mean);
    float m2 = 0.f;
#pragma unroll
    for (int j = 0; j < K; ++j) m2 = fmaf(v[j] - mean, v[j] - mean, m2);
    return merge(s, {static_cast<float>(K), mean, m2});
  }
  // An empty side is returned as the other (d * d * 0 would be NaN once d * d overflows). The mean
  // is a(1 - fb) + b fb, which stays finite for finite means (a + (b - a) fb overflows when b - a
  // does); with an infinite mean it follows torch's Welford, order included: NaN when a's mean is
  // infinite, inf when only b's is. m2 may overflow to inf: the variance of such values is past
  // the float range (inf is that variance rounded to float32).
  static __device__ __forceinline__ State merge(State a, State b) {
    if (a.n == 0.f) return b;
    if (b.n == 0.f) return a;
    const float n = a.n + b.n, fb = b.n / n, d = b.mean - a.mean;
    return {n, fmaf(b.mean, fb, fmaf(-a.mean, fb, a.mean)), a.m2 + b.m2 + d * d * a.n * fb};
  }
  template <typename Y, typename Y2>
  static __device__ __forceinline__ void write(State s, long long n, float corr, Y* y, Y2* y2) {
    // torch divides by max(0, N - correction): 0 gives inf, or NaN when m2 is 0 too.
    const float dof = fmaxf(static_cast<float>(n) - corr, 0.f);
    const float var = s.m2 / dof;
    store(y, OP == kReduceStd ? sqrtf(var) : var);
    if constexpr (OP == kReduceVarMean) store(y2, n == 0 ? __int_as_float(0x7fc00000) : s.mean);
  }
};
template <> struct Reducer<kReduceVar> : MomentLike<kReduceVar> {};
template <> struct Reducer<kReduceStd> : MomentLike<kReduceStd> {};
template <> struct Reducer<kReduceVarMean> : MomentLike<kReduceVarMean> {};

// logsumexp: a running (max, sum of exp(x - max)). -inf elements add nothing; a NaN gives NaN; an
// inf gives inf (s then counts the infs).
template <> struct Reducer<kReduceLogSumExp> {
  struct State { float m, s; };
  static __device__ __forceinline__ State init() { return {neg_inf(), 0.f}; }
  template <int K>
  static __device__ __forceinline__ State fold(State s, const float (&v)[K], long long, long long) {
    const float top = extreme_of<true>(v);  // the K's maximum, NaN kept
    if (is_nan(top)) return {s.m, top};
    if (top == neg_inf()) return s;
    const float m = fmaxf(s.m, top);  // one rescale of s per K elements
    float sum = 0.f;
    if (m == pos_inf()) {
#pragma unroll
      for (int j = 0; j < K; ++j) sum += v[j] == pos_inf() ? 1.f : 0.f;
      return {m, (s.m == pos_inf() || is_nan(s.s) ? s.s : 0.f) + sum};  // a NaN s stays NaN
    }
#pragma unroll
    for (int j = 0; j < K; ++j) sum += fast_exp(v[j] - m);
    return {m, fmaf(s.s, fast_exp(s.m - m), sum)};
  }
  static __device__ __forceinline__ State merge(State a, State b) {
    if (b.m == neg_inf() && !is_nan(b.s)) return a;
    if (a.m == neg_inf() && !is_nan(a.s)) return b;
    const float m = fmaxf(a.m, b.m);
    if (m == pos_inf()) return {m, a.s + b.s};  // exp(inf - inf) would be NaN
    return {m, a.s * fast_exp(a.m - m) + b.s * fast_exp(b.m - m)};
  }
  template <typename Y, typename Y2>
  static __device__ __forceinline__ void write(State s, long long, float, Y* y, Y2*) {
    store(y, (s.m == pos_inf() && !is_nan(s.s)) ? s.m : s.m + logf(s.s));
  }
};

// An element as the reduction sees it: T widened to float, first rounded to C when C is not T.
template <typename A, typename B> struct same_type { static constexpr bool value = false; };
template <typename A> struct same_type<A, A> { static constexpr bool value = true; };

template <typename T, typename C>
__device__ __forceinline__ float element(T v) {
  if constexpr (same_type<T, C>::value) return to_float(v);
  else return to_float(from_float<C>(to_float(v)));
}

// A vector's elements as the reduction sees them.
template <int K> struct Floats { float v[K]; };
template <typename C, typename T, int VEC>
__device__ __forceinline__ Floats<VEC> elements(const Vec<T, VEC>& x) {
  Floats<VEC> f;
#pragma unroll
  for (int e = 0; e < VEC; ++e) f.v[e] = element<T, C>(x.v[e]);
  return f;
}

// bool all/any read whole 32-bit words of bytes instead of widening each byte to a float: any ORs
// the words, all ANDs their per-byte nonzero marks (0x80 in each byte that is not 0; a true bool is
// any nonzero byte, as torch reads it).
template <typename T, typename C, int OP> struct word_logic {
  static constexpr bool value = false;
};
template <int OP> struct word_logic<bool, bool, OP> {
  static constexpr bool value = OP == kReduceAll || OP == kReduceAny;
};
__device__ __forceinline__ unsigned nonzero_bytes(unsigned w) {
  return (((w & 0x7f7f7f7fu) + 0x7f7f7f7fu) | w) & 0x80808080u;
}
template <int OP> __device__ __forceinline__ unsigned word_init() { return OP == kReduceAll ? 0x80808080u : 0u; }
template <int OP> __device__ __forceinline__ unsigned word_join(unsigned acc, unsigned w) {
  return OP == kReduceAll ? acc & nonzero_bytes(w) : acc | w;
}
// The flag of byte e of a joined word.
template <int OP> __device__ __forceinline__ int word_flag(unsigned acc, int e) {
  const unsigned byte = acc >> (8 * e) & 0xffu;
  return OP == kReduceAll ? byte == 0x80u : byte != 0u;
}
// The bytes as loaded (a union: NVRTC has no memcpy; a bool read as a value would be assumed 0 or 1).
template <typename T, int VEC> __device__ __forceinline__ Vec<unsigned, VEC / 4> words_of(const Vec<T, VEC>& v) {
  union {
    Vec<T, VEC> bytes;
    Vec<unsigned, VEC / 4> words;
  } u{v};
  return u.words;
}

// A column lane's rows n, n + TY, ... (< n1) from base (x at the lane's first column of row 0;
// null: the lane is past the last column), each loaded as an L (the lane's VEC elements, or the
// same bytes as 32-bit words): four loads in flight given to four(v, n) together, the rest one at
// a time to one(v, n).
template <typename L, int TY, typename T, typename Four, typename One>
__device__ __forceinline__ void walk_column_rows(const T* base, long long n, long long n1, long long I, Four four,
                                                 One one) {
  if (base == nullptr) return;
  for (; n + 3 * TY < n1; n += 4 * TY) {
    L v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = *reinterpret_cast<const L*>(base + (n + u * TY) * I);
    four(v, n);
  }
  for (; n < n1; n += TY) one(*reinterpret_cast<const L*>(base + n * I), n);
}

// A vector of a row folded into s (its elements at i0, i0 + 1, ...).
template <int OP, typename C, typename T, int VEC, typename S>
__device__ __forceinline__ S fold_vec(S s, const Vec<T, VEC>& v, long long i0) {
  using R = Reducer<OP>;
  if constexpr (word_logic<T, C, OP>::value && VEC % 4 == 0) {
    const auto w = words_of(v);
    unsigned acc = word_init<OP>();
#pragma unroll
    for (int k = 0; k < VEC / 4; ++k) acc = word_join<OP>(acc, w.v[k]);
    const int flag = OP == kReduceAll ? acc == 0x80808080u : acc != 0u;
    return R::merge(s, {flag});
  } else {
    return R::fold(s, elements<C>(v).v, i0, 1);
  }
}

}  // namespace reduce_detail

// I == 1: row m of x is x[m*N, (m+1)*N). grid: ceil(M / ROWS) * splits CTAs of TPR * ROWS threads.
// SPLIT: CTA (g, s) of `splits` covers vectors [s*chunk, (s+1)*chunk) of its row into ws[m*splits + s].
template <typename T, typename C, typename Y, typename Y2, int OP, int VEC, int TPR, int ROWS, bool SPLIT>
__global__ void __launch_bounds__(TPR * ROWS) reduce_rows(const T* __restrict__ x, Y* __restrict__ y,
                                                          Y2* __restrict__ y2, void* __restrict__ ws, long long M,
                                                          long long N, int splits, float corr) {
  using R = reduce_detail::Reducer<OP>;
  using S = typename R::State;
  __shared__ S scratch[ROWS][TPR > 32 ? TPR / 32 : 1];
  const int t = threadIdx.x % TPR, r = threadIdx.x / TPR;
  const long long group = SPLIT ? blockIdx.x / splits : blockIdx.x;
  const int split = SPLIT ? blockIdx.x % splits : 0;
  const long long m = group * ROWS + r;
  const long long vecs = N / VEC;
  const long long chunk = SPLIT ? (vecs + splits - 1) / splits : vecs;
  const long long begin = split * chunk;
  const long long end = begin + chunk < vecs ? begin + chunk : vecs;
  S s = R::init();
  if (m < M) {
    const Vec<T, VEC>* row = reinterpret_cast<const Vec<T, VEC>*>(x + m * N);
    long long k = begin + t;
    // Four loads in flight a thread before any is used.
    for (; k + 3 * TPR < end; k += 4 * TPR) {
      Vec<T, VEC> v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = row[k + u * TPR];
#pragma unroll
      for (int u = 0; u < 4; ++u) s = reduce_detail::fold_vec<OP, C>(s, v[u], (k + u * TPR) * VEC);
    }
    for (; k < end; k += TPR) s = reduce_detail::fold_vec<OP, C>(s, row[k], k * VEC);
  }
  s = group_reduce<TPR>(s, scratch[r], [](const S& a, const S& b) { return R::merge(a, b); });
  if (t == 0 && m < M) {
    if constexpr (SPLIT) reinterpret_cast<S*>(ws)[m * splits + split] = s;
    else R::write(s, N, corr, y + m, y2 + m);
  }
}

// I > 1: y[m, i] reduces x[m, :, i]. A CTA is TY warps; lane l owns columns c0 + l*VEC .. +VEC of
// one 32*VEC-column block. grid: xblocks * mblocks * splits (1-D; m strides by mblocks).
template <typename T, typename C, typename Y, typename Y2, int OP, int VEC, int TY, bool SPLIT>
__global__ void __launch_bounds__(32 * TY) reduce_cols(const T* __restrict__ x, Y* __restrict__ y,
                                                       Y2* __restrict__ y2, void* __restrict__ ws, long long M,
                                                       long long N, long long I, long long mblocks, int splits,
                                                       float corr) {
  using R = reduce_detail::Reducer<OP>;
  using S = typename R::State;
  __shared__ S part[TY][32 * VEC];
  const long long xblocks = (I / VEC + 31) / 32;
  const long long b = blockIdx.x;
  const long long xb = b % xblocks, mb = (b / xblocks) % mblocks;
  const int split = SPLIT ? static_cast<int>(b / (xblocks * mblocks)) : 0;
  const int lane = threadIdx.x % 32, ty = threadIdx.x / 32;
  const long long col = (xb * 32 + lane) * VEC;
  const long long chunk = SPLIT ? (N + splits - 1) / splits : N;
  const long long n0 = split * chunk;
  const long long n1 = n0 + chunk < N ? n0 + chunk : N;
  for (long long m = mb; m < M; m += mblocks) {
    S s[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) s[e] = R::init();
    const T* base = col < I ? x + m * N * I + col : nullptr;  // null: the lane is past the last column
    if constexpr (reduce_detail::word_logic<T, C, OP>::value && VEC % 4 == 0) {
      // bool all/any: a lane joins whole words of its VEC columns, flags unpacked once at the end
      using W = Vec<unsigned, VEC / 4>;
      unsigned acc[VEC / 4];
#pragma unroll
      for (int k = 0; k < VEC / 4; ++k) acc[k] = reduce_detail::word_init<OP>();
      const auto one = [&](const W& w, long long) {
#pragma unroll
        for (int k = 0; k < VEC / 4; ++k) acc[k] = reduce_detail::word_join<OP>(acc[k], w.v[k]);
      };
      const auto four = [&](const W (&w)[4], long long n) {
#pragma unroll
        for (int u = 0; u < 4; ++u) one(w[u], n);
      };
      reduce_detail::walk_column_rows<W, TY>(base, n0 + ty, n1, I, four, one);
#pragma unroll
      for (int e = 0; e < VEC; ++e) s[e] = S{reduce_detail::word_flag<OP>(acc[e / 4], e % 4)};
    } else {
      const auto four = [&](const Vec<T, VEC> (&v)[4], long long n) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {  // column e's four elements, rows n, n + TY, ...
          float f[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) f[u] = reduce_detail::element<T, C>(v[u].v[e]);
          s[e] = R::fold(s[e], f, n, TY);
        }
      };
      const auto one = [&](const Vec<T, VEC>& v, long long n) {
        const auto f = reduce_detail::elements<C>(v);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float single[1] = {f.v[e]};
          s[e] = R::fold(s[e], single, n, TY);
        }
      };
      reduce_detail::walk_column_rows<Vec<T, VEC>, TY>(base, n0 + ty, n1, I, four, one);
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e) part[ty][lane * VEC + e] = s[e];
    __syncthreads();
    // Warp 0 merges the TY partials of each column in warp order (ascending n chunks per warp are
    // interleaved, so argmax ties fall back to the index in merge()).
    if (ty == 0 && col < I) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        S acc = part[0][lane * VEC + e];
        for (int w = 1; w < TY; ++w) acc = R::merge(acc, part[w][lane * VEC + e]);
        const long long o = m * I + col + e;
        if constexpr (SPLIT) reinterpret_cast<S*>(ws)[o * splits + split] = acc;
        else R::write(acc, N, corr, y + o, y2 + o);
      }
    }
    __syncthreads();
  }
}

// The second pass of a split reduction: a warp per output; lanes stride over its `splits` partial
// states, then merge across the warp (merges are commutative: argmax ties go to the lower index).
template <typename Y, typename Y2, int OP>
__global__ void __launch_bounds__(256) reduce_finish(const void* __restrict__ ws, Y* __restrict__ y,
                                                     Y2* __restrict__ y2, long long outputs, long long N, int splits,
                                                     float corr) {
  using R = reduce_detail::Reducer<OP>;
  using S = typename R::State;
  const long long o = static_cast<long long>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (o >= outputs) return;  // whole warps leave together
  const S* p = reinterpret_cast<const S*>(ws) + o * splits;
  S acc = R::init();
  int k = lane;
  for (; k + 96 < splits; k += 128) {  // four loads in flight a lane: not one L2 round trip a state
    const S a = p[k], b = p[k + 32], c = p[k + 64], d = p[k + 96];
    acc = R::merge(acc, R::merge(R::merge(a, b), R::merge(c, d)));
  }
  for (; k < splits; k += 32) acc = R::merge(acc, p[k]);
  acc = group_reduce<32>(acc, static_cast<S*>(nullptr), [](const S& a, const S& b) { return R::merge(a, b); });
  if (lane == 0) R::write(acc, N, corr, y + o, y2 + o);
}

}  // namespace tileops

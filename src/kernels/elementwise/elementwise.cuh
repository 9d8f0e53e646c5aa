// The elementwise engine's kernels: y = f(x0, x1, ...) over broadcast operands of any strides.
// The host (src/targets/nvrtc/elementwise/) instantiates one of the loops below with an ew::Op
// (op.cuh) of the entry's generated expression functor and the operands' kinds:
//   contiguous_fwd  every operand dense in the output's order, or a broadcast single element:
//                   VEC elements a thread step (16-byte accesses for the widest operand), UNROLL
//                   steps in flight (all loads, then all stores), one contiguous chunk a CTA
//                   step; the n % VEC tail goes to the grid's first threads.
//   strided_fwd     any strides after the host collapsed the dims (RANK of them, innermost last):
//                   one element a thread step, the input offsets from the output index.
//   strided_vec_fwd the same offsets once per VEC elements of the innermost dim, when every input
//                   steps through it by 1 or 0 (a bias row, an outer broadcast, sliced rows):
//                   a 16-byte store, and per input a vector load (aligned), VEC loads, or one
//                   element held for the whole group (inner stride 0).
//   tiled_fwd       two collapsed dims where an input steps through the rows by 1 (transposed):
//                   such inputs go through 32P x 32P shared-memory tiles, P = 1 or 2 elements a
//                   thread (Op::staged, tile, stage_load, stage_store, rebase, fetch).
// IDX is the index type: int while every offset fits, else long long (past 2^31 elements).
// Op provides: load<V>(step, Regs<V>&) and store<V>(step, const Regs<V>&) for the contiguous path,
// gather<V>(const IDX* in_offsets, Regs<V>&) for strided_vec_fwd, fetch<V>(in_offsets, steps, Regs<V>&)
// for tiled_fwd, element(const IDX* in_offsets, IDX out_offset) for strided_fwd, one(k) (input k is one broadcast element
// on the contiguous path), and its pointers and scalars as members.
// The output may be an input (in place): each element is read and then written by one thread.
#pragma once
#include "common/dtypes.cuh"

namespace tileops {
namespace ew {

// Conversions between storage types and compute types, as torch casts (16-bit floats via float).
template <class To, class From> struct Cast { static __device__ __forceinline__ To apply(From v) { return static_cast<To>(v); } };
template <class To> struct Cast<To, f16> { static __device__ __forceinline__ To apply(f16 v) { return static_cast<To>(to_float(v)); } };
template <class To> struct Cast<To, bf16> { static __device__ __forceinline__ To apply(bf16 v) { return static_cast<To>(to_float(v)); } };
template <class From> struct Cast<f16, From> { static __device__ __forceinline__ f16 apply(From v) { return from_float<f16>(static_cast<float>(v)); } };
template <class From> struct Cast<bf16, From> { static __device__ __forceinline__ bf16 apply(From v) { return from_float<bf16>(static_cast<float>(v)); } };
template <> struct Cast<f16, f16> { static __device__ __forceinline__ f16 apply(f16 v) { return v; } };
template <> struct Cast<bf16, bf16> { static __device__ __forceinline__ bf16 apply(bf16 v) { return v; } };
template <> struct Cast<f16, bf16> { static __device__ __forceinline__ f16 apply(bf16 v) { return from_float<f16>(to_float(v)); } };
template <> struct Cast<bf16, f16> { static __device__ __forceinline__ bf16 apply(f16 v) { return from_float<bf16>(to_float(v)); } };
template <class To, class From> __device__ __forceinline__ To cast(From v) { return Cast<To, From>::apply(v); }

// ---- device functions an `elementwise:` expression may call (manifest grammar: docs/MANIFEST.md) ----
// Float forms call libdevice's accurate functions (no fast math), as torch's CUDA kernels do.
__device__ __forceinline__ float exp(float x) { return ::expf(x); }
__device__ __forceinline__ float exp2(float x) { return ::exp2f(x); }
__device__ __forceinline__ float expm1(float x) { return ::expm1f(x); }
__device__ __forceinline__ float log(float x) { return ::logf(x); }
__device__ __forceinline__ float log2(float x) { return ::log2f(x); }
__device__ __forceinline__ float log10(float x) { return ::log10f(x); }
__device__ __forceinline__ float log1p(float x) { return ::log1pf(x); }
__device__ __forceinline__ float sqrt(float x) { return ::sqrtf(x); }
__device__ __forceinline__ float rsqrt(float x) { return ::rsqrtf(x); }
__device__ __forceinline__ float sin(float x) { return ::sinf(x); }
__device__ __forceinline__ float cos(float x) { return ::cosf(x); }
__device__ __forceinline__ float tan(float x) { return ::tanf(x); }
__device__ __forceinline__ float asin(float x) { return ::asinf(x); }
__device__ __forceinline__ float acos(float x) { return ::acosf(x); }
__device__ __forceinline__ float atan(float x) { return ::atanf(x); }
__device__ __forceinline__ float sinh(float x) { return ::sinhf(x); }
__device__ __forceinline__ float cosh(float x) { return ::coshf(x); }
__device__ __forceinline__ float tanh(float x) { return ::tanhf(x); }
__device__ __forceinline__ float asinh(float x) { return ::asinhf(x); }
__device__ __forceinline__ float acosh(float x) { return ::acoshf(x); }
__device__ __forceinline__ float atanh(float x) { return ::atanhf(x); }
__device__ __forceinline__ float erf(float x) { return ::erff(x); }
__device__ __forceinline__ float erfc(float x) { return ::erfcf(x); }
__device__ __forceinline__ float erfinv(float x) { return ::erfinvf(x); }
__device__ __forceinline__ float pow(float a, float b) { return ::powf(a, b); }
__device__ __forceinline__ float atan2(float a, float b) { return ::atan2f(a, b); }
__device__ __forceinline__ float hypot(float a, float b) { return ::hypotf(a, b); }
__device__ __forceinline__ float copysign(float a, float b) { return ::copysignf(a, b); }
__device__ __forceinline__ bool isnan(float x) { return x != x; }
__device__ __forceinline__ bool isinf(float x) { return ::fabsf(x) == __int_as_float(0x7f800000); }
__device__ __forceinline__ bool isfinite(float x) { return ::fabsf(x) < __int_as_float(0x7f800000); }
__device__ __forceinline__ bool signbit(float x) { return (__float_as_uint(x) >> 31) != 0; }
template <class T> __device__ __forceinline__ bool isnan(T) { return false; }
template <class T> __device__ __forceinline__ bool isinf(T) { return false; }
template <class T> __device__ __forceinline__ bool isfinite(T) { return true; }
template <class T> __device__ __forceinline__ bool signbit(T x) { return x < T(0); }
// fmodf bit for bit, without libdevice's loop when |a / b| < 2^23: q = trunc(a / b) is the true
// truncated quotient or one more (a / b rounded onto the next integer); a - q * b is then exact in one
// fma, and adding b with a's sign brings a remainder of the wrong sign back, exactly. fmod_split also
// gives that true quotient (valid when `fast`).
struct FmodSplit {
  float mod, quotient;
  bool fast;
};
__device__ __noinline__ float fmod_slow(float a, float b) { return ::fmodf(a, b); }
__device__ __forceinline__ FmodSplit fmod_split(float a, float b) {
  float q = ::truncf(a / b);
  if (!(::fabsf(q) < 8388608.f) || isinf(b)) return {fmod_slow(a, b), 0.f, false};
  float r = ::fmaf(-q, b, a);
  if (r != 0.f && ((r < 0.f) != (a < 0.f))) {
    r += ::copysignf(b, a);
    q -= ((a < 0.f) != (b < 0.f)) ? -1.f : 1.f;
  }
  return {r == 0.f ? ::copysignf(0.f, a) : r, q, true};
}
__device__ __forceinline__ float fmod(float a, float b) { return fmod_split(a, b).mod; }
__device__ __forceinline__ float reciprocal(float x) { return 1.f / x; }
__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + ::expf(-x)); }
__device__ __forceinline__ float frac(float x) { return x - ::truncf(x); }
// torch.round: halves to even.
__device__ __forceinline__ float round(float x) { return ::rintf(x); }
__device__ __forceinline__ float floor(float x) { return ::floorf(x); }
__device__ __forceinline__ float ceil(float x) { return ::ceilf(x); }
__device__ __forceinline__ float trunc(float x) { return ::truncf(x); }
template <class T> __device__ __forceinline__ T floor(T x) { return x; }  // integers are their own floor
template <class T> __device__ __forceinline__ T ceil(T x) { return x; }
template <class T> __device__ __forceinline__ T round(T x) { return x; }
template <class T> __device__ __forceinline__ T trunc(T x) { return x; }
__device__ __forceinline__ float abs(float x) { return ::fabsf(x); }
template <class T> __device__ __forceinline__ T abs(T x) { return x < T(0) ? T(-x) : x; }
// torch.sign: (0 < x) - (x < 0), so NaN and -0.0 give +0.0 as in torch.
template <class T> __device__ __forceinline__ T sign(T x) { return static_cast<T>((T(0) < x) - (x < T(0))); }
// torch.maximum / minimum: a NaN operand wins; otherwise fmaxf/fminf as torch's CUDA kernels, which
// order the zeros (max(-0.0, 0.0) is 0.0, min is -0.0).
template <class T> __device__ __forceinline__ T maximum(T a, T b) { return a > b ? a : b; }
template <class T> __device__ __forceinline__ T minimum(T a, T b) { return a < b ? a : b; }
// Written as selects over values computed up front: the nested ternary compiled to a branch
// around each element. The NaN that wins is the operand itself (a's first), as in torch.
__device__ __forceinline__ float maximum(float a, float b) {
  const float m = ::fmaxf(a, b), n = isnan(a) ? a : b;
  return (isnan(a) || isnan(b)) ? n : m;
}
__device__ __forceinline__ float minimum(float a, float b) {
  const float m = ::fminf(a, b), n = isnan(a) ? a : b;
  return (isnan(a) || isnan(b)) ? n : m;
}
// torch.clamp / clamp_min / clamp_max with Scalar bounds: a NaN bound gives NaN everywhere (torch
// fills the result with it), a NaN input stays NaN, lo > hi gives hi; floats through fmaxf/fminf as
// torch's CUDA kernel, which order the zeros (clamp(-0.0, 0.0, 1.0) is 0.0).
template <class T> __device__ __forceinline__ T clamp(T x, T lo, T hi) {
  const T y = x < lo ? lo : x;
  return y > hi ? hi : y;
}
__device__ __forceinline__ float clamp(float x, float lo, float hi) {
  if (lo != lo) return lo;
  if (hi != hi) return hi;
  return x != x ? x : ::fminf(::fmaxf(x, lo), hi);
}
template <class T> __device__ __forceinline__ T clamp_min(T x, T lo) { return x < lo ? lo : x; }
template <class T> __device__ __forceinline__ T clamp_max(T x, T hi) { return x > hi ? hi : x; }
__device__ __forceinline__ float clamp_min(float x, float lo) { return lo != lo ? lo : (x != x ? x : ::fmaxf(x, lo)); }
__device__ __forceinline__ float clamp_max(float x, float hi) { return hi != hi ? hi : (x != x ? x : ::fminf(x, hi)); }
// -a in two's complement: the minimum negates to itself instead of overflowing.
template <class T> __device__ __forceinline__ T wrap_neg(T a) {
  return static_cast<T>(0ull - static_cast<unsigned long long>(a));
}
// a / b; for integers truncated toward zero, where division by zero gives 0 (torch's CPU kernel
// raises, its CUDA one leaves the value unspecified) and min / -1 wraps to min (it would trap).
template <class T> __device__ __forceinline__ T quotient(T a, T b) {
  if (b == T(0)) return T(0);
  if (T(-1) < T(0) && b == T(-1)) return wrap_neg(a);
  return static_cast<T>(a / b);
}
__device__ __forceinline__ float quotient(float a, float b) { return a / b; }
// Python's modulo: the result takes the divisor's sign (torch.remainder).
__device__ __forceinline__ float remainder(float a, float b) {
  float r = fmod(a, b);
  if (r != 0.f && ((r < 0.f) != (b < 0.f))) r += b;
  return r;
}
template <class T> __device__ __forceinline__ T remainder(T a, T b) {
  T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
// torch.floor_divide on floats: floor of the true quotient, computed as torch does (c10's
// div_floor_floating) so that results next to an integer agree bit for bit. Below 2^22 its
// (a - mod) / b lies within 0.5 of the true truncated quotient, which it then rounds to: that
// quotient, less one where mod and b differ in sign, without the second division. The rest (and a
// zero b) out of line, so that the vector loop holds only the common path.
__device__ __noinline__ float floor_divide_slow(float a, float b, float mod) {
  if (b == 0.f) return a / b;
  float div = (a - mod) / b;
  if (mod != 0.f && ((b < 0.f) != (mod < 0.f))) div -= 1.f;
  if (div == 0.f) return ::copysignf(0.f, a / b);
  float fl = ::floorf(div);
  if (div - fl > 0.5f) fl += 1.f;
  return fl;
}
__device__ __forceinline__ float floor_divide(float a, float b) {
  const FmodSplit f = fmod_split(a, b);
  if (!f.fast || !(::fabsf(f.quotient) < 4194304.f)) return floor_divide_slow(a, b, f.mod);
  const bool down = f.mod != 0.f && ((b < 0.f) != (f.mod < 0.f));
  return down ? f.quotient - 1.f : f.quotient;  // a zero keeps a / b's sign
}
// Integers: division by zero gives 0 and min / -1 wraps, as in quotient().
template <class T> __device__ __forceinline__ T floor_divide(T a, T b) {
  if (b == T(0)) return T(0);
  if (T(-1) < T(0) && b == T(-1)) return wrap_neg(a);
  const T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? T(q - 1) : q;
}
__device__ __forceinline__ float softplus(float x, float beta, float threshold) {
  return x * beta > threshold ? x : ::log1pf(::expf(x * beta)) / beta;
}
// Forms for results rounded to float16 or bfloat16, whose half-ulp (2^-12, 2^-9 relative) dwarfs
// float32's: the hardware's approximate exp2 / log2 with each function's cancellation handled, under
// 2^-15 relative error (bounds below, from CUDA's for __expf and __logf), instead of libdevice's
// accurate forms, which leave these ops bound by arithmetic. A result may differ from torch's by one
// 16-bit ulp where the exact value lies that close to a rounding boundary. value() of a kernel with
// a 16-bit output opens them with TILEOPS_EW_16BIT_RESULTS.
namespace for16 {
// exp(x) - 1: the series to x^4 for |x| < 1/16 (relative error under x^4 / 120), else an exp less 1:
// __expf's 2 + 1.17 |x| ulp, under 2^-17 of the result wherever it is finite.
__device__ __forceinline__ float expm1(float x) {
  if (::fabsf(x) < 0.0625f) return x * (1.f + x * (0.5f + x * (0.16666667f + x * 0.041666668f)));
  return __expf(x) - 1.f;
}
// log1p(exp(beta x)) / beta: log1p's series to t^3 for t = exp(beta x) < 2^-6 (relative error under
// t^3 / 4, and t's own under 2^-17), else the log of 1 + t: __logf's 2^-21.4 absolute error on
// [0.5, 2] is under 2^-15 of a result of at least log(1 + 2^-6).
__device__ __forceinline__ float softplus(float x, float beta, float threshold) {
  if (x * beta > threshold) return x;
  const float t = __expf(x * beta);
  return (t < 0.015625f ? t * (1.f - t * (0.5f - t * 0.33333334f)) : __logf(1.f + t)) / beta;
}
// floor(a / b) for operands of float16 or bfloat16 values (at most 11 significant bits each): a true
// quotient q that is not an integer lies farther than 2^-11 * min(1, |q|) from every nonzero integer,
// and the rounded a / b at most |q| * 2^-24 from q (keeping its sign), so below |q| = 2^13 the floor
// of the rounded quotient is the true floor, which is torch's result. A zero (or underflowed) or
// larger quotient, a zero or infinite b and NaNs take the general form.
__device__ __forceinline__ float floor_divide(float a, float b) {
  const float q = a / b;
  if (::fabsf(q) < 8192.f && q != 0.f) return ::floorf(q);
  return ew::floor_divide(a, b);
}
// torch.remainder of such operands: with n = that floor of a / b, a - n * b is the remainder (or the
// fmod plus b that torch rounds) exactly, so one fma rounds it once as torch does; an exact multiple
// gives a zero of a's sign, as torch's fmod. Other quotients take the general form.
__device__ __forceinline__ float remainder(float a, float b) {
  const float q = a / b;
  if (::fabsf(q) < 8192.f && q != 0.f) {
    const float r = ::fmaf(-::floorf(q), b, a);
    return r == 0.f ? ::copysignf(0.f, a) : r;
  }
  return ew::remainder(a, b);
}
}  // namespace for16
#define TILEOPS_EW_16BIT_RESULTS using for16::expm1; using for16::softplus;
// value() of a kernel whose tensor operands are all float16 or bfloat16 opens these (the manifest's
// expressions apply them to the operands themselves).
#define TILEOPS_EW_16BIT_OPERANDS using for16::floor_divide; using for16::remainder;
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.f + ::erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.f + ::tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
// torch.lerp: the form that is exact at both ends.
__device__ __forceinline__ float lerp(float a, float b, float w) {
  return ::fabsf(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.f - w);
}
// torch.round(x, decimals): halves to even at 10^-decimals.
__device__ __forceinline__ float round_decimals(float x, float decimals) {
  if (decimals == 0.f) return ::rintf(x);
  const float p = ::powf(10.f, ::fabsf(decimals));
  return decimals > 0.f ? ::rintf(x * p) / p : ::rintf(x / p) * p;
}
template <class T> __device__ __forceinline__ T round_decimals(T x, T) { return x; }
// Truth value as in torch's logical ops: nonzero (NaN included) is true.
template <class T> __device__ __forceinline__ bool truth(T x) { return static_cast<bool>(x); }
__device__ __forceinline__ bool truth(float x) { return x != 0.f; }
template <class T> __device__ __forceinline__ bool logical_not(T x) { return !static_cast<bool>(x); }
__device__ __forceinline__ bool logical_not(float x) { return x == 0.f; }
template <class T> __device__ __forceinline__ T bitwise_not(T x) { return static_cast<T>(~x); }
__device__ __forceinline__ bool bitwise_not(bool x) { return !x; }
__device__ __forceinline__ float nan_to_num(float x, float nan, float posinf, float neginf) {
  return x != x ? nan : (isinf(x) ? (x > 0.f ? posinf : neginf) : x);
}
template <class T> __device__ __forceinline__ T nan_to_num(T x, T, T, T) { return x; }  // integers: unchanged

// ---- the two loops ----

template <class Op, int VEC, int UNROLL, class IDX>
__global__ void __launch_bounds__(256) contiguous_fwd(const Op op, IDX n) {
  const IDX nv = n / VEC;
  // Each CTA step covers one contiguous chunk of blockDim * UNROLL vectors, as torch's loops do.
  const IDX chunk = static_cast<IDX>(blockDim.x) * UNROLL;
  for (IDX base = static_cast<IDX>(blockIdx.x) * chunk; base < nv; base += static_cast<IDX>(gridDim.x) * chunk) {
    typename Op::template Regs<VEC> r[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const IDX i = base + u * static_cast<IDX>(blockDim.x) + threadIdx.x;
      if (i < nv) op.template load<VEC>(i, r[u]);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const IDX i = base + u * static_cast<IDX>(blockDim.x) + threadIdx.x;
      if (i < nv) op.template store<VEC>(i, r[u]);
    }
  }
  if constexpr (VEC > 1) {
    const IDX tid = static_cast<IDX>(blockIdx.x) * blockDim.x + threadIdx.x;
    const IDX t = nv * VEC + tid;  // fewer than VEC trailing elements
    if (t < n) {
      IDX off[Op::kIn];
#pragma unroll
      for (int k = 0; k < Op::kIn; ++k) off[k] = Op::one(k) ? 0 : t;
      op.element(off, t);
    }
  }
}

template <int RANK, int NIN, class IDX>
struct Strides {
  IDX size[RANK];       // collapsed sizes, innermost last
  IDX in[NIN][RANK];    // element strides of each input (0 where it broadcasts)
};

// The input offsets of output element i (the collapsed dims, innermost last).
template <int RANK, int NIN, class IDX>
__device__ __forceinline__ void offsets_of(IDX i, const Strides<RANK, NIN, IDX>& s, IDX* off) {
#pragma unroll
  for (int k = 0; k < NIN; ++k) off[k] = 0;
  IDX rest = i;
#pragma unroll
  for (int d = RANK - 1; d >= 0; --d) {
    const IDX q = d > 0 ? rest / s.size[d] : 0;
    const IDX c = d > 0 ? rest - q * s.size[d] : rest;
#pragma unroll
    for (int k = 0; k < NIN; ++k) off[k] += c * s.in[k][d];
    rest = q;
  }
}

// The innermost size is a multiple of VEC: a group never crosses a row.
template <class Op, int RANK, int VEC, class IDX>
__global__ void __launch_bounds__(256) strided_vec_fwd(const Op op, const Strides<RANK, Op::kIn, IDX> s, IDX n) {
  const IDX groups = n / VEC;
  const IDX stride = static_cast<IDX>(gridDim.x) * blockDim.x;
  for (IDX g = static_cast<IDX>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride) {
    IDX off[Op::kIn];
    offsets_of<RANK, Op::kIn, IDX>(g * VEC, s, off);
    typename Op::template Regs<VEC> r;
    op.template gather<VEC>(off, r);
    op.template store<VEC>(g, r);
  }
}

// Two collapsed dims [rows, cols] where some inputs step through the rows by 1 (a transposed
// operand): Op::staged(k) inputs are read tile by tile along their own rows into shared memory, so
// both their loads and the output's stores are coalesced. 256 threads: 32 x P columns and 8 rows a
// step, P elements a thread (P = 2 needs even sizes: a pair never crosses the edge). Each phase
// issues all its loads before it stores: the output may be an input, so the compiler could not
// hoist a load above an earlier store on its own.
template <class Op, class IDX, int P>
__global__ void __launch_bounds__(256) tiled_fwd(const Op op, const Strides<2, Op::kIn, IDX> s, IDX) {
  constexpr int RW = 8, T = 32 * P, J = T / RW;
  constexpr int PITCH = T + 1;  // odd: a column of 16-bit slots spreads over the banks
  __shared__ __align__(16) unsigned char tiles[Op::kTiles][T * PITCH * Op::kSlot];
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  const IDX rows = s.size[0], cols = s.size[1];
  const IDX tiles_c = (cols + T - 1) / T;
  const IDX n_tiles = ((rows + T - 1) / T) * tiles_c;
  Op local = op;
  IDX step[Op::kIn];  // between the P elements of a group, per input
#pragma unroll
  for (int k = 0; k < Op::kIn; ++k) {
    if (Op::staged(k)) local.rebase(k, tiles[Op::tile(k)]);
    step[k] = Op::staged(k) ? static_cast<IDX>(PITCH) : s.in[k][1];
  }
  for (IDX t = blockIdx.x; t < n_tiles; t += gridDim.x) {
    const IDX r0 = (t / tiles_c) * T, c0 = (t % tiles_c) * T;
#pragma unroll
    for (int k = 0; k < Op::kIn; ++k) {
      if (!Op::staged(k)) continue;
      typename Op::template Regs<P> v[J];
#pragma unroll
      for (int j = 0; j < J; ++j) {  // consecutive threads: consecutive rows, stride 1 in input k
        const IDX r = r0 + P * tx, c = c0 + ty + RW * j;
        if (r < rows && c < cols) op.template stage_load<P>(k, r * s.in[k][0] + c * s.in[k][1], v[j]);
      }
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const IDX r = r0 + P * tx, c = c0 + ty + RW * j;
        if (r < rows && c < cols) op.template stage_store<P>(k, v[j], (ty + RW * j) * PITCH + P * tx, tiles[Op::tile(k)]);
      }
    }
    __syncthreads();
    typename Op::template Regs<P> v[J];
#pragma unroll
    for (int j = 0; j < J; ++j) {  // consecutive threads: consecutive column groups of the output
      const IDX r = r0 + ty + RW * j, c = c0 + P * tx;
      if (r >= rows || c >= cols) continue;
      IDX off[Op::kIn];
#pragma unroll
      for (int k = 0; k < Op::kIn; ++k)
        off[k] = Op::staged(k) ? static_cast<IDX>(P * tx * PITCH + ty + RW * j) : r * s.in[k][0] + c * s.in[k][1];
      local.template fetch<P>(off, step, v[j]);
    }
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const IDX r = r0 + ty + RW * j, c = c0 + P * tx;
      if (r < rows && c < cols) local.template store<P>((r * cols + c) / P, v[j]);
    }
    __syncthreads();  // the next tile overwrites the slots
  }
}

template <class Op, int RANK, class IDX>
__global__ void __launch_bounds__(256) strided_fwd(const Op op, const Strides<RANK, Op::kIn, IDX> s, IDX n) {
  const IDX stride = static_cast<IDX>(gridDim.x) * blockDim.x;
  for (IDX i = static_cast<IDX>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    IDX off[Op::kIn];
    offsets_of<RANK, Op::kIn, IDX>(i, s, off);
    op.element(off, i);
  }
}

}  // namespace ew
}  // namespace tileops

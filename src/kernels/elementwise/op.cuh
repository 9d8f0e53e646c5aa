// The Op the elementwise loops (elementwise.cuh) instantiate, as a template over its operands' kinds and
// an expression: Expr is a functor of the generated elementwise/exprs.cuh (one per manifest
// `elementwise:` expression, scripts/codegen), C the compute type, TO the output's type, NS the params
// the expression reads, I0..I3 the inputs (In<...>; NoIn past the last).
//
// Layout (the host fills it byte for byte, src/targets/nvrtc/elementwise/elementwise.cpp): the inputs'
// pointers, the output's pointer, then the NS params in C.
#pragma once
#include "elementwise/elementwise.cuh"

namespace tileops {
namespace ew {

// An input: its storage type T; ONE: a single broadcast element (the contiguous path), or one element
// held for a group of V (the vectorised strided path); ALIGNED: its V elements load as one vector;
// STAGED: read through shared-memory tiles (tiled_fwd); FIXED: a fixed-dtype input (a bool mask), read
// as itself (16-bit floats as float), never promoted to C.
template <class T, bool ONE, bool ALIGNED, bool STAGED, bool FIXED>
struct In {
  using type = T;
  static constexpr bool kReal = true, kOne = ONE, kAligned = ALIGNED, kStaged = STAGED, kFixed = FIXED;
};
struct NoIn {
  using type = unsigned char;
  static constexpr bool kReal = false, kOne = false, kAligned = false, kStaged = false, kFixed = false;
};

template <bool B, class A, class Z> struct Pick { using type = A; };
template <class A, class Z> struct Pick<false, A, Z> { using type = Z; };
template <class T> struct Is16 { static constexpr bool value = false; };
template <> struct Is16<f16> { static constexpr bool value = true; };
template <> struct Is16<bf16> { static constexpr bool value = true; };
template <int K> struct Idx { static constexpr int value = K; };

// What the expression reads an input as: the compute type, or a fixed input's own (16-bit as float).
template <class C, class I>
using ValueOf = typename Pick<I::kFixed, typename Pick<Is16<typename I::type>::value, float, typename I::type>::type,
                              C>::type;
// An input's registers for a group of V elements: V of them, or the one element held for the group.
template <class I, int V>
using RegOf = typename Pick<I::kOne, typename I::type, Vec<typename I::type, V>>::type;

// Bytes a tile slot holds for an input (1 unless staged), and the largest of four.
template <class I> __host__ __device__ constexpr int slot_of() { return I::kStaged ? int(sizeof(typename I::type)) : 1; }
__host__ __device__ constexpr int max_of(int a, int b, int c, int d) {
  return a > b ? (a > c ? (a > d ? a : d) : (c > d ? c : d)) : (b > c ? (b > d ? b : d) : (c > d ? c : d));
}

// The inputs' pointers, typed (ptxas schedules typed members better than a void* array: identical SASS
// to the former generated Op), then the output's.
template <class TO, class I0, class I1, class I2, class I3, int N> struct Pointers;
template <class TO, class I0, class I1, class I2, class I3> struct Pointers<TO, I0, I1, I2, I3, 1> {
  const typename I0::type* p0;
  TO* out;
};
template <class TO, class I0, class I1, class I2, class I3> struct Pointers<TO, I0, I1, I2, I3, 2> {
  const typename I0::type* p0;
  const typename I1::type* p1;
  TO* out;
};
template <class TO, class I0, class I1, class I2, class I3> struct Pointers<TO, I0, I1, I2, I3, 3> {
  const typename I0::type* p0;
  const typename I1::type* p1;
  const typename I2::type* p2;
  TO* out;
};
template <class TO, class I0, class I1, class I2, class I3> struct Pointers<TO, I0, I1, I2, I3, 4> {
  const typename I0::type* p0;
  const typename I1::type* p1;
  const typename I2::type* p2;
  const typename I3::type* p3;
  TO* out;
};
template <class C, int NS> struct Scalars {
  C s[NS];
  __device__ __forceinline__ const C* scalars() const { return s; }
};
template <class C> struct Scalars<C, 0> {
  __device__ __forceinline__ const C* scalars() const { return nullptr; }
};

template <class Expr, class C, class TO, int NS, class I0, class I1 = NoIn, class I2 = NoIn, class I3 = NoIn>
struct Op : Pointers<TO, I0, I1, I2, I3, int(I0::kReal) + I1::kReal + I2::kReal + I3::kReal>, Scalars<C, NS> {
  static constexpr int kIn = int(I0::kReal) + I1::kReal + I2::kReal + I3::kReal;
  static_assert(kIn >= 1, "an elementwise op reads at least one input");
  template <int K>
  using InAt = typename Pick<K == 0, I0, typename Pick<K == 1, I1, typename Pick<K == 2, I2, I3>::type>::type>::type;
  template <int K> using T = typename InAt<K>::type;
  // 16-bit results and 16-bit operands take the for16 forms of some functions (elementwise.cuh).
  static constexpr bool kResult16 = Is16<TO>::value;
  static constexpr bool kOperands16 = Is16<typename I0::type>::value && (!I1::kReal || Is16<typename I1::type>::value) &&
                                      (!I2::kReal || Is16<typename I2::type>::value) &&
                                      (!I3::kReal || Is16<typename I3::type>::value);
  // The tiled loop: a shared-memory tile per staged input, slots as wide as the widest of them.
  static constexpr int kStaged = int(I0::kStaged) + I1::kStaged + I2::kStaged + I3::kStaged;
  static constexpr int kTiles = kStaged > 0 ? kStaged : 1;
  static constexpr int kSlot = max_of(slot_of<I0>(), slot_of<I1>(), slot_of<I2>(), slot_of<I3>());

  static __device__ __forceinline__ constexpr bool one(int k) {
    return (k == 0 && I0::kOne) || (k == 1 && I1::kOne) || (k == 2 && I2::kOne) || (k == 3 && I3::kOne);
  }
  static __device__ __forceinline__ constexpr bool staged(int k) {
    return (k == 0 && I0::kStaged) || (k == 1 && I1::kStaged) || (k == 2 && I2::kStaged) || (k == 3 && I3::kStaged);
  }
  // The tile of a staged input: the staged inputs before it.
  static __device__ __forceinline__ constexpr int tile(int k) {
    return (k > 0 && I0::kStaged) + (k > 1 && I1::kStaged) + (k > 2 && I2::kStaged);
  }

  template <int K> __device__ __forceinline__ const T<K>* ptr() const {
    if constexpr (K == 0) return this->p0;
    else if constexpr (K == 1) return this->p1;
    else if constexpr (K == 2) return this->p2;
    else return this->p3;
  }
  // Each method below handles input K, then calls itself for K + 1 (the inputs unrolled at compile time).
  template <int K = 0> __device__ __forceinline__ void rebase(int k, const unsigned char* tile) {
    if constexpr (InAt<K>::kStaged) {
      if (k == K) {
        const T<K>* t = reinterpret_cast<const T<K>*>(tile);
        if constexpr (K == 0) this->p0 = t;
        else if constexpr (K == 1) this->p1 = t;
        else if constexpr (K == 2) this->p2 = t;
        else this->p3 = t;
      }
    }
    if constexpr (K + 1 < kIn) rebase<K + 1>(k, tile);
  }

  // The expression over the inputs' stored values (it converts each to ValueOf itself, in order).
  template <class... V> __device__ __forceinline__ TO apply(V... v) const {
    return Expr::template value<C, TO, kResult16, kOperands16, ValueOf<C, I0>, ValueOf<C, I1>, ValueOf<C, I2>,
                                ValueOf<C, I3>>(this->scalars(), v...);
  }

  template <int V> struct Regs {
    RegOf<I0, V> x0;
    RegOf<I1, V> x1;
    RegOf<I2, V> x2;
    RegOf<I3, V> x3;
  };
  template <int K, int V> static __device__ __forceinline__ RegOf<InAt<K>, V>& reg(Regs<V>& r) {
    if constexpr (K == 0) return r.x0;
    else if constexpr (K == 1) return r.x1;
    else if constexpr (K == 2) return r.x2;
    else return r.x3;
  }
  template <int K, int V> static __device__ __forceinline__ const RegOf<InAt<K>, V>& reg(const Regs<V>& r) {
    if constexpr (K == 0) return r.x0;
    else if constexpr (K == 1) return r.x1;
    else if constexpr (K == 2) return r.x2;
    else return r.x3;
  }
  // Element j of input K's group (the held element of a ONE input).
  template <int K, int V> static __device__ __forceinline__ T<K> elem(const Regs<V>& r, int j) {
    if constexpr (InAt<K>::kOne) return reg<K>(r);
    else return reg<K>(r).v[j];
  }
  template <int V> __device__ __forceinline__ TO value_at(const Regs<V>& r, int j) const {
    if constexpr (kIn == 1) return apply(elem<0>(r, j));
    else if constexpr (kIn == 2) return apply(elem<0>(r, j), elem<1>(r, j));
    else if constexpr (kIn == 3) return apply(elem<0>(r, j), elem<1>(r, j), elem<2>(r, j));
    else return apply(elem<0>(r, j), elem<1>(r, j), elem<2>(r, j), elem<3>(r, j));
  }

  // The contiguous path: V elements a step per input (one element for a broadcast single element).
  template <int V, int K = 0, class I> __device__ __forceinline__ void load(I i, Regs<V>& r) const {
    if constexpr (InAt<K>::kOne) reg<K>(r) = ptr<K>()[0];
    else reg<K>(r) = reinterpret_cast<const Vec<T<K>, V>*>(ptr<K>())[i];
    if constexpr (K + 1 < kIn) load<V, K + 1>(i, r);
  }
  // The strided path's groups: V elements of the innermost dim from each input's offset.
  template <int V, int K = 0, class I> __device__ __forceinline__ void gather(const I* off, Regs<V>& r) const {
    if constexpr (InAt<K>::kOne) {
      reg<K>(r) = ptr<K>()[off[K]];
    } else if constexpr (InAt<K>::kAligned) {
      reg<K>(r) = *reinterpret_cast<const Vec<T<K>, V>*>(ptr<K>() + off[K]);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) reg<K>(r).v[j] = ptr<K>()[off[K] + j];
    }
    if constexpr (K + 1 < kIn) gather<V, K + 1>(off, r);
  }
  template <int V, int K = 0, class I> __device__ __forceinline__ void stage_load(int k, I off, Regs<V>& r) const {
    if constexpr (InAt<K>::kStaged) {
      if (k == K) {
        if constexpr (InAt<K>::kAligned) {
          reg<K>(r) = *reinterpret_cast<const Vec<T<K>, V>*>(ptr<K>() + off);
        } else {
#pragma unroll
          for (int i = 0; i < V; ++i) reg<K>(r).v[i] = ptr<K>()[off + i];
        }
      }
    }
    if constexpr (K + 1 < kIn) stage_load<V, K + 1>(k, off, r);
  }
  template <int V, int K = 0>
  __device__ __forceinline__ void stage_store(int k, const Regs<V>& r, int slot, unsigned char* tile) const {
    if constexpr (InAt<K>::kStaged) {
      if (k == K) {
#pragma unroll
        for (int i = 0; i < V; ++i) reinterpret_cast<T<K>*>(tile)[slot + i] = reg<K>(r).v[i];
      }
    }
    if constexpr (K + 1 < kIn) stage_store<V, K + 1>(k, r, slot, tile);
  }
  // The tiled loop's groups: V elements `step` apart (a tile's pitch for a staged input).
  template <int V, int K = 0, class I>
  __device__ __forceinline__ void fetch(const I* off, const I* step, Regs<V>& r) const {
    if constexpr (InAt<K>::kAligned && !InAt<K>::kStaged) {
      reg<K>(r) = *reinterpret_cast<const Vec<T<K>, V>*>(ptr<K>() + off[K]);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) reg<K>(r).v[i] = ptr<K>()[off[K] + i * step[K]];
    }
    if constexpr (K + 1 < kIn) fetch<V, K + 1>(off, step, r);
  }
  template <int V, class I> __device__ __forceinline__ void store(I i, const Regs<V>& r) const {
    Vec<TO, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = value_at(r, j);
    reinterpret_cast<Vec<TO, V>*>(this->out)[i] = y;
  }
  template <class I> __device__ __forceinline__ void element(const I* off, I o) const {
    if constexpr (kIn == 1) this->out[o] = apply(ptr<0>()[off[0]]);
    else if constexpr (kIn == 2) this->out[o] = apply(ptr<0>()[off[0]], ptr<1>()[off[1]]);
    else if constexpr (kIn == 3) this->out[o] = apply(ptr<0>()[off[0]], ptr<1>()[off[1]], ptr<2>()[off[2]]);
    else this->out[o] = apply(ptr<0>()[off[0]], ptr<1>()[off[1]], ptr<2>()[off[2]], ptr<3>()[off[3]]);
  }
};

}  // namespace ew
}  // namespace tileops

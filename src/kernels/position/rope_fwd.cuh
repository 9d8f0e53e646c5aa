// Rotary embedding in place on q [t, hq, HEAD_DIM] and k [t, hk, HEAD_DIM] (vLLM semantics; see
// manifests/position.yaml; the flat [t, heads * HEAD_DIM] form is the same memory). cos_sin_cache
// row p: cos in columns [0, ROT/2), sin in [ROT/2, ROT); its element type C is float or T
// (dtype_combos), widened to float: the math is fp32 either way. p is positions[token] (int64, or
// int32 in rope_indexed_fwd), plus offsets[token] when OFFSETS. Without a key, k is null and hk 0.
//
// Layout: a "unit" is P rotation pairs of one head. Neox (P = VEC): elements [u*P, +P) pair with
// [ROT/2 + u*P, +P), two VEC-wide accesses. GPT-J (P = VEC/2, or 1 when VEC == 1): the 2P
// contiguous elements from 2*u*P hold P interleaved pairs, one VEC-wide access (two when VEC == 1),
// so the lanes of a warp read and write one contiguous span (a unit of 2*VEC elements made each
// access cover half of every 32-byte sector, docs/PERF.md). Threads of a
// block: LANES lanes (units of a row), `slots` head slots, `tpb` tokens; a thread loads cos/sin for
// its unit once and rotates that unit in every head of its token (q heads, then k heads). Dims past
// ROT are never touched.
// Host side (src/targets/nvrtc/position/rope.cpp) needs (ROT/2) % P == 0, HEAD_DIM % VEC == 0,
// q/k aligned to VEC elements and the cache to min(P, 16 / sizeof(C)) elements.
#pragma once
#include "common/dtypes.cuh"

namespace tileops {

template <int ROT, int VEC, bool NEOX>
struct RopeShape {
  static constexpr int kPairs = NEOX ? VEC : (VEC >= 2 ? VEC / 2 : 1);  // rotation pairs a unit
  static constexpr int kUnits = ROT / 2 / kPairs;
  static constexpr int kLanes = kUnits < 128 ? kUnits : 128;
};

namespace rope_detail {
template <typename T, typename C, typename I, int HEAD_DIM, int ROT, int VEC, bool NEOX, bool OFFSETS>
__device__ __forceinline__ void run(const I* __restrict__ positions, const I* __restrict__ offsets, T* __restrict__ q,
                                    T* __restrict__ k, const C* __restrict__ cache, long long tokens, int hq, int hk,
                                    long long max_pos, int slots, int tpb) {
  using V = Vec<T, VEC>;
  using Shape = RopeShape<ROT, VEC, NEOX>;
  constexpr int kHalf = ROT / 2;
  constexpr int P = Shape::kPairs;
  constexpr int kUnits = Shape::kUnits;
  constexpr int kLanes = Shape::kLanes;
  constexpr int kCV = P * sizeof(C) <= 16 ? P : 16 / static_cast<int>(sizeof(C));  // <= 16-byte loads
  using CV = Vec<C, kCV>;
  // Accesses a unit makes: neox one on each side of ROT/2; GPT-J its 2P elements in VEC-wide steps.
  constexpr int kAcc = NEOX ? 2 : 2 * P / VEC;

  const int lane = threadIdx.x % kLanes;
  const int slot = (threadIdx.x / kLanes) % slots;
  const long long token = static_cast<long long>(blockIdx.x) * tpb + threadIdx.x / (kLanes * slots);
  if (token >= tokens) return;
  long long pos = positions[token];
  if constexpr (OFFSETS) pos += offsets[token];  // vLLM's batched form: the cache row is offset + position
  if (pos < 0 || pos >= max_pos) return;  // documented: out-of-range tokens stay unchanged
  const C* cs = cache + pos * ROT;
  const int heads = hq + hk;

  for (int u = lane; u < kUnits; u += kLanes) {
    float c[P], s[P];
#pragma unroll
    for (int j = 0; j < P; j += kCV) {
      const CV cv = *reinterpret_cast<const CV*>(cs + u * P + j);
      const CV sv = *reinterpret_cast<const CV*>(cs + kHalf + u * P + j);
#pragma unroll
      for (int i = 0; i < kCV; ++i) { c[j + i] = to_float(cv.v[i]); s[j + i] = to_float(sv.v[i]); }
    }
    for (int h = slot; h < heads; h += slots) {
      T* row = h < hq ? q + (token * hq + h) * HEAD_DIM : k + (token * hk + (h - hq)) * HEAD_DIM;
      V* acc[kAcc];
      if constexpr (NEOX) {
        acc[0] = reinterpret_cast<V*>(row + u * P);
        acc[1] = reinterpret_cast<V*>(row + kHalf + u * P);
      } else {
#pragma unroll
        for (int a = 0; a < kAcc; ++a) acc[a] = reinterpret_cast<V*>(row + 2 * u * P + a * VEC);
      }
      V in[kAcc], out[kAcc];
#pragma unroll
      for (int a = 0; a < kAcc; ++a) in[a] = *acc[a];
#pragma unroll
      for (int j = 0; j < P; ++j) {
        // Pair j: neox (in[0][j], in[1][j]); GPT-J elements 2j and 2j + 1 of the unit's span.
        const int e1 = NEOX ? j : 2 * j, e2 = NEOX ? VEC + j : 2 * j + 1;
        const float x1 = to_float(in[e1 / VEC].v[e1 % VEC]), x2 = to_float(in[e2 / VEC].v[e2 % VEC]);
        out[e1 / VEC].v[e1 % VEC] = from_float<T>(x1 * c[j] - x2 * s[j]);
        out[e2 / VEC].v[e2 % VEC] = from_float<T>(x2 * c[j] + x1 * s[j]);
      }
#pragma unroll
      for (int a = 0; a < kAcc; ++a) *acc[a] = out[a];
    }
  }
}
}  // namespace rope_detail

// int64 positions, no offsets (RopeNeoxCachedFwdOp / RopeNonNeoxCachedFwdOp with int64 positions).
template <typename T, typename C, int HEAD_DIM, int ROT, int VEC, bool NEOX>
__global__ void rope_fwd(const long long* __restrict__ positions, T* __restrict__ q, T* __restrict__ k,
                         const C* __restrict__ cache, long long tokens, int hq, int hk, long long max_pos,
                         int slots, int tpb) {
  rope_detail::run<T, C, long long, HEAD_DIM, ROT, VEC, NEOX, false>(positions, nullptr, q, k, cache, tokens, hq, hk,
                                                                     max_pos, slots, tpb);
}

// Positions of index type I (int or long long), and per-token offsets added to them when OFFSETS.
template <typename T, typename C, typename I, int HEAD_DIM, int ROT, int VEC, bool NEOX, bool OFFSETS>
__global__ void rope_indexed_fwd(const I* __restrict__ positions, const I* __restrict__ offsets, T* __restrict__ q,
                                 T* __restrict__ k, const C* __restrict__ cache, long long tokens, int hq, int hk,
                                 long long max_pos, int slots, int tpb) {
  rope_detail::run<T, C, I, HEAD_DIM, ROT, VEC, NEOX, OFFSETS>(positions, offsets, q, k, cache, tokens, hq, hk, max_pos,
                                                               slots, tpb);
}

}  // namespace tileops

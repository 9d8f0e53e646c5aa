// Rotary embedding in place on q [t, hq, HEAD_DIM] and k [t, hk, HEAD_DIM] (vLLM semantics; see
// manifests/position.yaml). cos_sin_cache row p: cos in columns [0, ROT/2), sin in [ROT/2, ROT);
// its element type C is float or T (dtype_combos), widened to float: the math is fp32 either way.
//
// Layout: a "unit" is VEC rotation pairs of one head. Neox: elements [u*VEC, +VEC) pair with
// [ROT/2 + u*VEC, +VEC); GPT-J: the 2*VEC elements from 2*u*VEC hold VEC interleaved pairs. Either
// way a unit is two VEC-wide accesses and VEC cos/sin values. Threads of a block: LANES lanes (units
// of a row), `slots` head slots, `tpb` tokens; a thread loads cos/sin for its unit once and rotates
// that unit in every head of its token (q heads, then k heads). Dims past ROT are never touched.
// Host side (src/targets/nvrtc/position_rope_fwd.cpp) needs (ROT/2) % VEC == 0, HEAD_DIM % VEC == 0,
// q/k aligned to VEC elements and the cache to min(VEC, 16 / sizeof(C)) elements.
#pragma once
#include "common/dtypes.cuh"

namespace tileops {

template <int ROT, int VEC>
struct RopeShape {
  static constexpr int kUnits = ROT / 2 / VEC;
  static constexpr int kLanes = kUnits < 128 ? kUnits : 128;
};

template <typename T, typename C, int HEAD_DIM, int ROT, int VEC, bool NEOX>
__global__ void rope_fwd(const long long* __restrict__ positions, T* __restrict__ q, T* __restrict__ k,
                         const C* __restrict__ cache, long long tokens, int hq, int hk, long long max_pos,
                         int slots, int tpb) {
  using V = Vec<T, VEC>;
  constexpr int kHalf = ROT / 2;
  constexpr int kUnits = RopeShape<ROT, VEC>::kUnits;
  constexpr int kLanes = RopeShape<ROT, VEC>::kLanes;
  constexpr int kCV = VEC * sizeof(C) <= 16 ? VEC : 16 / static_cast<int>(sizeof(C));  // <= 16-byte loads
  using CV = Vec<C, kCV>;

  const int lane = threadIdx.x % kLanes;
  const int slot = (threadIdx.x / kLanes) % slots;
  const long long token = static_cast<long long>(blockIdx.x) * tpb + threadIdx.x / (kLanes * slots);
  if (token >= tokens) return;
  const long long pos = positions[token];
  if (pos < 0 || pos >= max_pos) return;  // documented: out-of-range tokens stay unchanged
  const C* cs = cache + pos * ROT;
  const int heads = hq + hk;

  for (int u = lane; u < kUnits; u += kLanes) {
    float c[VEC], s[VEC];
#pragma unroll
    for (int j = 0; j < VEC; j += kCV) {
      const CV cv = *reinterpret_cast<const CV*>(cs + u * VEC + j);
      const CV sv = *reinterpret_cast<const CV*>(cs + kHalf + u * VEC + j);
#pragma unroll
      for (int i = 0; i < kCV; ++i) { c[j + i] = to_float(cv.v[i]); s[j + i] = to_float(sv.v[i]); }
    }
    const int off_a = NEOX ? u * VEC : 2 * u * VEC;
    const int off_b = NEOX ? kHalf + u * VEC : 2 * u * VEC + VEC;
    for (int h = slot; h < heads; h += slots) {
      T* row = h < hq ? q + (token * hq + h) * HEAD_DIM : k + (token * hk + (h - hq)) * HEAD_DIM;
      V* pa = reinterpret_cast<V*>(row + off_a);
      V* pb = reinterpret_cast<V*>(row + off_b);
      const V a = *pa, b = *pb;
      V oa, ob;
      if constexpr (NEOX) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float x1 = to_float(a.v[j]), x2 = to_float(b.v[j]);
          oa.v[j] = from_float<T>(x1 * c[j] - x2 * s[j]);
          ob.v[j] = from_float<T>(x2 * c[j] + x1 * s[j]);
        }
      } else {
        // Element e of the unit is a.v[e] (e < VEC) or b.v[e - VEC]; pair j is (2j, 2j + 1).
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const int e = 2 * j;
          const float x1 = to_float(e < VEC ? a.v[e] : b.v[e - VEC]);
          const float x2 = to_float(e + 1 < VEC ? a.v[e + 1] : b.v[e + 1 - VEC]);
          const T y1 = from_float<T>(x1 * c[j] - x2 * s[j]);
          const T y2 = from_float<T>(x2 * c[j] + x1 * s[j]);
          if (e < VEC) oa.v[e] = y1; else ob.v[e - VEC] = y1;
          if (e + 1 < VEC) oa.v[e + 1] = y2; else ob.v[e + 1 - VEC] = y2;
        }
      }
      *pa = oa;
      *pb = ob;
    }
  }
}

}  // namespace tileops

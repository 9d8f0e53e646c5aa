// RopeNeoxCachedFwdOp / RopeNonNeoxCachedFwdOp and their flat forms (RopeNeoxCachedFlatFwdOp / RopeNonNeoxCachedFlatFwdOp:
// q and k as [t, heads * head_size]) on the nvrtc target: which specialisation of
// src/kernels/position/rope_fwd.cuh serves a call, and how it is launched.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/nvrtc_target.h"

namespace tileops::nvrtc {

struct RopeSpec {
  c10::ScalarType dtype;  // q's and k's
  int head_dim;
  int rot_dim;
  int vec;    // elements an access (16 bytes when the layout and pointers allow)
  bool neox;
  c10::ScalarType cache_dtype = c10::ScalarType::Float;  // float32 or q's dtype (dtype_combos)
  c10::ScalarType index_dtype = c10::ScalarType::Long;   // positions' (and offsets'): int64 or int32
  bool offsets = false;                                   // per-token offsets added to the positions
  std::string arch;

  // int32 positions or offsets take rope_indexed_fwd; int64 positions alone, rope_fwd.
  bool indexed() const { return index_dtype != c10::ScalarType::Long || offsets; }
  TILEOPS_IDENTITY(RopeSpec, dtype, head_dim, rot_dim, vec, neox, cache_dtype, index_dtype, offsets, arch)
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

// What a call asks for; the style (neox or GPT-J) is the op itself.
struct RopeProblem {
  bool neox;
  c10::ScalarType dtype, cache_dtype;
  int64_t head_dim, rot_dim;
  int max_vec;  // widest access the pointers' alignment allows (the cache's folded in)
  c10::ScalarType index_dtype = c10::ScalarType::Long;
  bool offsets = false;
  TILEOPS_IDENTITY(RopeProblem, neox, dtype, cache_dtype, head_dim, rot_dim, max_vec, index_dtype, offsets)
};

// max_vec: the widest access the pointers' alignment allows (1..16/elem_size; the caller folds the
// cache's alignment in).
RopeSpec plan_rope(c10::ScalarType dtype, int64_t head_dim, int64_t rot_dim, bool neox, int max_vec,
                   c10::ScalarType cache_dtype = c10::ScalarType::Float);
// Rotation pairs a thread's unit holds: neox vec (two accesses), GPT-J vec / 2 (one access, or 1).
int rope_pairs(const RopeSpec& p);
std::string rope_name(const RopeSpec& p, const std::string& arch);
jit::KernelSource rope_source(const RopeSpec& p, const std::string& arch);

// Block shape for `heads` (hq + hk) heads a token: threads = lanes * slots * tpb <= 256.
struct RopeLaunch {
  int lanes, slots, tpb;
};
RopeLaunch rope_launch_shape(const RopeSpec& p, int64_t heads);

}  // namespace tileops::nvrtc

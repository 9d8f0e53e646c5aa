// The vLLM-form RoPE entries (RopeNeoxCachedFwdOp, RopeNonNeoxCachedFwdOp and their flat forms) share
// one argument order, so every target reads each style's entries through the Neox entry's view.
#pragma once

#include "tileops_generated/ops.h"

namespace tileops::rope_cached_args {

namespace op = tileops::ops::position_rope_neox_cached_fwd;
namespace op2 = tileops::ops::position_rope_non_neox_cached_fwd;
namespace flat = tileops::ops::position_rope_neox_cached_flat_fwd;
namespace flat2 = tileops::ops::position_rope_non_neox_cached_flat_fwd;
static_assert(int{op::q} == int{op2::q} && int{op::k} == int{op2::k} && int{op::positions} == int{op2::positions} &&
                  int{op::cos_sin_cache} == int{op2::cos_sin_cache},
              "both RoPE entries share one argument order");
static_assert(int{flat::q} == int{flat2::q} && int{flat::k} == int{flat2::k} &&
                  int{flat::positions} == int{flat2::positions} && int{flat::cos_sin_cache} == int{flat2::cos_sin_cache} &&
                  int{flat::offsets} == int{flat2::offsets} && int{flat::head_size} == int{flat2::head_size},
              "both flat RoPE entries share one argument order");

}  // namespace tileops::rope_cached_args

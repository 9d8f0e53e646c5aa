// What DropoutFwdOp and DropoutBwdOp compute from (p, training), shared by the targets
// (docs/CONTRACT.md §11): element i's factor is 0 when its Philox word is below drop_below, else
// scale; the output is float32(x) * factor rounded once to x's dtype.
#pragma once

#include <cmath>
#include <cstdint>

namespace tileops {

struct DropoutRule {
  uint32_t drop_below;  // round(p * 2^32): the words that drop their element
  float scale;          // 1 / float32(1 - p), divided in float32 as torch's CUDA kernel does
};

inline DropoutRule dropout_rule(double p, bool training) {
  if (!training || p == 0) return {0, 1.f};
  if (p >= 1) return {0, 0.f};  // every element x * 0, as torch's p = 1
  const double words = std::nearbyint(p * 4294967296.0);
  return {words >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(words), 1.f / static_cast<float>(1.0 - p)};
}

}  // namespace tileops

// RopeNeoxCachedFwdOp, RopeNonNeoxCachedFwdOp and their flat forms on the reference target: the vLLM formula
// written out with ATen ops (no torch function exists), in float32, rounded once; the correctness
// oracle. The cache may be float16/bfloat16 (q's dtype, dtype_combos): its values are widened to
// float32 exactly. Positions are int64 or int32; the flat forms view q and k as [t, heads, head_size]
// and add the optional per-token offsets to the positions; an absent key is skipped.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/stack.h>
#include <c10/util/Exception.h>

#include <optional>

#include "targets/builtin.h"
#include "targets/position_rope_cached_args.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = rope_cached_args::op;
namespace flat = rope_cached_args::flat;
// Each style's entries are read through the Neox entry's view.
using RopeView = op::View;
using FlatView = flat::View;

template <bool kNeox, bool kFlat>
class RopeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    // The 3-D form's tensors, or the flat form's viewed as [t, heads, head_size] plus its offsets.
    const at::Tensor* offsets = nullptr;
    std::optional<int64_t> head_size;
    const at::Tensor *positions_in, *cache_in, *q, *k;
    if constexpr (kFlat) {
      const FlatView v(call);
      positions_in = &v.positions(), cache_in = &v.cos_sin_cache(), q = &v.q(), k = v.k();
      offsets = v.offsets(), head_size = v.head_size();
    } else {
      const RopeView v(call);
      positions_in = &v.positions(), cache_in = &v.cos_sin_cache(), q = &v.q(), k = v.k();
    }
    at::Tensor positions = positions_in->to(at::kLong);
    if (offsets) positions = positions + *offsets;
    const at::Tensor& cache = *cache_in;
    const int64_t max_pos = cache.size(0), rot = cache.size(1), half = rot / 2;
    if (positions.numel() > 0) {
      // The manifest's rule for data (no shape can say it): 0 <= positions < max_pos.
      refuse_host_read_during_capture(call.op_name, "positions", positions);
      const int64_t lo = positions.min().item<int64_t>(), hi = positions.max().item<int64_t>();
      const int64_t bad = lo < 0 ? lo : hi;
      TORCH_CHECK_INDEX(lo >= 0 && hi < max_pos, call.op_name, ": '", kFlat ? "positions + offsets" : "positions",
                        "' must satisfy 0 <= ", kFlat ? "positions + offsets" : "positions",
                        " < max_pos (max_pos=", max_pos, ", the rows of cos_sin_cache), got ", bad);
    }
    const at::Tensor cs = cache.index_select(0, positions).to(at::kFloat).unsqueeze(1);  // [t, 1, rot]
    const at::Tensor cos = cs.narrow(2, 0, half), sin = cs.narrow(2, half, half);
    for (const at::Tensor* qk : {q, k}) {
      if (qk == nullptr) continue;  // key=None
      at::Tensor heads = *qk;
      if (head_size) heads = heads.view({heads.size(0), heads.size(1) / *head_size, *head_size});
      const at::Tensor x = heads.narrow(2, 0, rot);  // a view: written in place below
      const at::Tensor xf = x.to(at::kFloat);
      at::Tensor y;
      if (kNeox) {
        const at::Tensor x1 = xf.narrow(2, 0, half), x2 = xf.narrow(2, half, half);
        y = at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, 2);
      } else {
        const at::Tensor x1 = xf.slice(2, 0, rot, 2), x2 = xf.slice(2, 1, rot, 2);
        y = at::stack({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1).flatten(2);
      }
      x.copy_(y);
    }
  }
};

KernelBuilder rope_neox_cached_builder() { return stateless_builder<RopeReference<true, false>>("rope_neox_cached_fwd (ATen)"); }
KernelBuilder rope_non_neox_cached_builder() { return stateless_builder<RopeReference<false, false>>("rope_gptj_cached_fwd (ATen)"); }
KernelBuilder rope_neox_cached_flat_builder() { return stateless_builder<RopeReference<true, true>>("rope_neox_cached_fwd (ATen)"); }
KernelBuilder rope_non_neox_cached_flat_builder() {
  return stateless_builder<RopeReference<false, true>>("rope_gptj_cached_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, RopeNeoxCachedFwdOp, rope_neox_cached_builder);
TILEOPS_BUILTIN_KERNEL(reference, RopeNonNeoxCachedFwdOp, rope_non_neox_cached_builder);
TILEOPS_BUILTIN_KERNEL(reference, RopeNeoxCachedFlatFwdOp, rope_neox_cached_flat_builder);
TILEOPS_BUILTIN_KERNEL(reference, RopeNonNeoxCachedFlatFwdOp, rope_non_neox_cached_flat_builder);

}  // namespace
}  // namespace tileops::reference

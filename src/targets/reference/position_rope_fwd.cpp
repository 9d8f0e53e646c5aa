// RopeNeoxFwdOp and RopeNonNeoxFwdOp on the reference target: the vLLM formula written out with
// ATen ops (no torch function exists), in float32, rounded once; the correctness oracle. The cache
// may be float16/bfloat16 (q's dtype, dtype_combos): its values are widened to float32 exactly.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::position_rope_neox_fwd;
namespace op2 = tileops::ops::position_rope_non_neox_fwd;
static_assert(int{op::q} == int{op2::q} && int{op::k} == int{op2::k} && int{op::positions} == int{op2::positions} &&
                  int{op::cos_sin_cache} == int{op2::cos_sin_cache},
              "both RoPE entries share one argument order");
using RopeView = op::View;  // serves both entries

template <bool kNeox>
class RopeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const RopeView v(call);
    const at::Tensor& positions = v.positions();
    const at::Tensor& cache = v.cos_sin_cache();
    const int64_t max_pos = cache.size(0), rot = cache.size(1), half = rot / 2;
    if (positions.numel() > 0) {
      // The manifest's rule for data (no shape can say it): 0 <= positions < max_pos.
      const int64_t lo = positions.min().item<int64_t>(), hi = positions.max().item<int64_t>();
      const int64_t bad = lo < 0 ? lo : hi;
      TORCH_CHECK_INDEX(lo >= 0 && hi < max_pos, call.op_name, ": 'positions' must satisfy 0 <= positions < max_pos ",
                        "(max_pos=", max_pos, ", the rows of cos_sin_cache), got ", bad);
    }
    const at::Tensor cs = cache.index_select(0, positions).to(at::kFloat).unsqueeze(1);  // [t, 1, rot]
    const at::Tensor cos = cs.narrow(2, 0, half), sin = cs.narrow(2, half, half);
    for (const at::Tensor* qk : {&v.q(), &v.k()}) {
      const at::Tensor x = qk->narrow(2, 0, rot);  // a view: written in place below
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

KernelBuilder rope_neox_builder() { return stateless_builder<RopeReference<true>>("rope_neox_fwd (ATen)"); }
KernelBuilder rope_non_neox_builder() { return stateless_builder<RopeReference<false>>("rope_gptj_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, RopeNeoxFwdOp, rope_neox_builder);
TILEOPS_BUILTIN_KERNEL(reference, RopeNonNeoxFwdOp, rope_non_neox_builder);

}  // namespace
}  // namespace tileops::reference

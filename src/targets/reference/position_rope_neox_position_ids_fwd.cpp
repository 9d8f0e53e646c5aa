// RopeNeoxPositionIdsFwdOp on the reference target: TileOPs' table (float32 angles and cos/sin,
// rounded to x's dtype) gathered at the positions, the Neox rotation in float32, rounded once.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/pow.h>
#include <c10/util/Exception.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::position_rope_neox_position_ids_fwd;

class RopePositionIdsReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    const at::Tensor& x = v.x();
    at::Tensor out = v.output();
    const int64_t head_dim = x.size(2), rot = v.rotary_dim().value_or(head_dim), half = rot / 2;
    const at::Tensor positions = v.position_ids().to(at::kLong);
    if (positions.numel() > 0) {  // data, which no shape rule can state: 0 <= position_ids < max_position
      const int64_t lo = positions.min().item<int64_t>(), hi = positions.max().item<int64_t>();
      TORCH_CHECK_VALUE(lo >= 0 && hi < v.max_position(), call.op_name, ": 'position_ids' must lie in [0, ",
                        v.max_position(), ") (max_position), got ", lo < 0 ? lo : hi);
    }
    out.copy_(x);  // the columns past rotary_dim, and every column when there is nothing to rotate
    if (half == 0 || x.numel() == 0) return;
    const auto f32 = x.options().dtype(at::kFloat);
    const at::Tensor freqs = at::pow(v.base(), at::arange(half, f32) / static_cast<double>(half)).reciprocal();
    const at::Tensor angles = positions.to(at::kFloat).unsqueeze(1) * freqs.unsqueeze(0);  // [tokens, half]
    // The table is rounded to x's dtype (TileOPs keeps it so), then widened exactly for the math.
    const at::Tensor cos = angles.cos().to(x.scalar_type()).to(at::kFloat).unsqueeze(1);
    const at::Tensor sin = angles.sin().to(x.scalar_type()).to(at::kFloat).unsqueeze(1);
    const at::Tensor x1 = x.narrow(2, 0, half).to(at::kFloat), x2 = x.narrow(2, half, half).to(at::kFloat);
    out.narrow(2, 0, half).copy_(x1 * cos - x2 * sin);
    out.narrow(2, half, half).copy_(x2 * cos + x1 * sin);
  }
};

KernelBuilder rope_position_ids_builder() {
  return stateless_builder<RopePositionIdsReference>("rope_neox_position_ids_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, RopeNeoxPositionIdsFwdOp, rope_position_ids_builder);

}  // namespace
}  // namespace tileops::reference

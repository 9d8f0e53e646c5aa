// RopeNeoxPositionIdsFwdOp on the reference target: TileOPs' table (float32 angles and cos/sin,
// rounded to x's dtype) gathered at the positions, the Neox rotation in float32, rounded once
// (rope_neox.h, shared with the attention ops that fuse it).
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "targets/reference/rope_neox.h"
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
    const int64_t head_dim = x.size(2), rot = v.rotary_dim().value_or(head_dim);
    const at::Tensor positions = v.position_ids().to(at::kLong);
    if (positions.numel() > 0) {  // data, which no shape rule can state: 0 <= position_ids < max_position
      refuse_host_read_during_capture(call.op_name, "position_ids", positions);
      const int64_t lo = positions.min().item<int64_t>(), hi = positions.max().item<int64_t>();
      TORCH_CHECK_VALUE(lo >= 0 && hi < v.max_position(), call.op_name, ": 'position_ids' must lie in [0, ",
                        v.max_position(), ") (max_position), got ", lo < 0 ? lo : hi);
    }
    out.copy_(rope_neox_float(x, positions, v.base(), rot, x.scalar_type()));
  }
};

KernelBuilder rope_position_ids_builder() {
  return stateless_builder<RopePositionIdsReference>("rope_neox_position_ids_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, RopeNeoxPositionIdsFwdOp, rope_position_ids_builder);

}  // namespace
}  // namespace tileops::reference

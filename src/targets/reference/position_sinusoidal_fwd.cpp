// SinusoidalFwdOp on the reference target: the formula in float64 with ATen ops, rounded once.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/stack.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::position_sinusoidal_fwd;

class SinusoidalReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    const int64_t n = v.num_positions(), dim = v.dim();
    const auto opts = at::TensorOptions().dtype(at::kDouble).device(call.device);
    const at::Tensor inv_freq = at::pow(v.base(), at::arange(0, dim, 2, opts) / -double(dim));
    const at::Tensor angle = at::arange(n, opts).unsqueeze(1) * inv_freq;  // [n, dim/2]
    // Interleaved: column 2i is sin, 2i+1 cos.
    v.table().copy_(at::stack({at::sin(angle), at::cos(angle)}, -1).view({n, dim}));
  }
};

KernelBuilder sinusoidal_builder() { return stateless_builder<SinusoidalReference>("sinusoidal (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, SinusoidalFwdOp, sinusoidal_builder);

}  // namespace
}  // namespace tileops::reference

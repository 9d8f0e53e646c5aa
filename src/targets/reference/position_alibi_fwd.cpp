// AlibiFwdOp on the reference target: the formula with ATen ops (serves any device).
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/pow.h>

#include <cmath>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::position_alibi_fwd;

class AlibiReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    const int64_t heads = v.num_heads();
    int64_t n = 1;
    while (n * 2 <= heads) n *= 2;
    const auto opts = at::TensorOptions().dtype(at::kDouble).device(call.device);
    at::Tensor first = at::pow(2.0, at::arange(1, n + 1, opts) * (-8.0 / n));
    at::Tensor slopes = first;
    if (heads > n) {
      at::Tensor extra = at::pow(2.0, (at::arange(0, heads - n, opts) * 2 + 1) * (-4.0 / n));
      slopes = at::cat({first, extra});
    }
    v.slopes().copy_(slopes);
  }
};

KernelBuilder alibi_builder() { return stateless_builder<AlibiReference>("alibi_slopes (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, AlibiFwdOp, alibi_builder);

}  // namespace
}  // namespace tileops::reference

// DropoutFwdOp and DropoutBwdOp on the reference target: the factor of each element from the Philox
// words of its seed, computed on the host (src/kernels/common/philox.cuh is plain C++ too), then
// float32(x) * factor in ATen, rounded once to x's dtype. Serves any device (the factor is moved).
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/Parallel.h>

#include "kernels/common/philox.cuh"
#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "targets/regularization_dropout_rule.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

void dropout(const at::Tensor& x, const at::Tensor& y, double p, int64_t seed, bool training) {
  const DropoutRule rule = dropout_rule(p, training);
  const int64_t n = x.numel();
  at::Tensor factor = at::empty({n}, at::TensorOptions().dtype(at::kFloat));
  float* f = factor.data_ptr<float>();
  const auto key = static_cast<unsigned long long>(seed);
  at::parallel_for(0, (n + 3) / 4, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const Philox4 w = philox_group(key, static_cast<unsigned long long>(g));
      for (int64_t k = 0; k < 4 && 4 * g + k < n; ++k) f[4 * g + k] = w.w[k] < rule.drop_below ? 0.f : rule.scale;
    }
  });
  y.copy_((x.to(at::kFloat) * factor.to(x.device()).view(x.sizes())).to(x.scalar_type()));
}

class DropoutFwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const ops::regularization_dropout_fwd::View v(call);
    dropout(v.input(), v.output(), v.p(), v.seed(), v.training());
  }
};

class DropoutBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const ops::regularization_dropout_bwd::View v(call);
    dropout(v.doutput(), v.dinput(), v.p(), v.seed(), v.training());
  }
};

KernelBuilder dropout_fwd_builder() { return stateless_builder<DropoutFwdReference>("dropout_fwd (ATen)"); }
KernelBuilder dropout_bwd_builder() { return stateless_builder<DropoutBwdReference>("dropout_bwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, DropoutFwdOp, dropout_fwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, DropoutBwdOp, dropout_bwd_builder);

}  // namespace
}  // namespace tileops::reference

// The scans on the reference target: ref_api itself (at::cumsum / at::cumprod with dtype=,
// at::logcumsumexp) written straight into y, the oracle of the nvrtc scan engine.
#include <ATen/core/Tensor.h>
#include <ATen/ops/cumprod.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/logcumsumexp.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace cumsum = tileops::ops::reduction_cumsum_fwd;
namespace cumprod = tileops::ops::reduction_cumprod_fwd;
namespace logcumsumexp = tileops::ops::reduction_log_cum_sum_exp_fwd;

class CumsumReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const cumsum::View v(call);
    at::Tensor y = v.y();  // contiguous, y's dtype: the out variant writes it in place
    at::cumsum_out(y, v.x(), v.dim(), v.dtype());
  }
};

class CumprodReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const cumprod::View v(call);
    at::Tensor y = v.y();
    at::cumprod_out(y, v.x(), v.dim(), v.dtype());
  }
};

class LogCumSumExpReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const logcumsumexp::View v(call);
    at::Tensor y = v.y();
    at::logcumsumexp_out(y, v.x(), v.dim());
  }
};

KernelBuilder cumsum_fwd_builder() { return stateless_builder<CumsumReference>("cumsum_fwd (ATen)"); }
KernelBuilder cumprod_fwd_builder() { return stateless_builder<CumprodReference>("cumprod_fwd (ATen)"); }
KernelBuilder log_cum_sum_exp_fwd_builder() {
  return stateless_builder<LogCumSumExpReference>("log_cum_sum_exp_fwd (ATen)");
}

}  // namespace

TILEOPS_BUILTIN_KERNEL(reference, CumsumFwdOp, cumsum_fwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, CumprodFwdOp, cumprod_fwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, LogCumSumExpFwdOp, log_cum_sum_exp_fwd_builder);

}  // namespace tileops::reference

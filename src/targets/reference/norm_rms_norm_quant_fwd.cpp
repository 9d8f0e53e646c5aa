// The quantised-output RMSNorms on the reference target (RMSNormStaticQuantFwdOp and the fused-add and
// dynamic forms): vLLM's formulas written with ATen. y = T(T(s * r) * w); q = quant(y * (1 / scale)).
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/round.h>
#include <ATen/ops/rsqrt.h>

#include <limits>
#include <vector>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace rs = tileops::ops::norm_rms_norm_static_quant_fwd;
namespace fs = tileops::ops::norm_fused_add_rms_norm_static_quant_fwd;
namespace rd = tileops::ops::norm_rms_norm_dynamic_quant_fwd;
namespace fd = tileops::ops::norm_fused_add_rms_norm_dynamic_quant_fwd;

std::vector<int64_t> row_dims(const at::Tensor& x, at::IntArrayRef normalized_shape) {
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - static_cast<int64_t>(normalized_shape.size()); d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// y in float32, with vLLM's two roundings to s's dtype: after s * r and after the weight product.
at::Tensor normed(const at::Tensor& s, at::IntArrayRef normalized_shape, const at::Tensor& w, double eps) {
  const at::ScalarType t = s.scalar_type();
  const at::Tensor sf = s.to(at::kFloat);
  const at::Tensor r = at::rsqrt(sf.square().mean(row_dims(s, normalized_shape), /*keepdim=*/true) + eps);
  const at::Tensor xr = (sf * r).to(t).to(at::kFloat);
  return (xr * w.to(at::kFloat)).to(t).to(at::kFloat);
}

// v = y * inv_scale in float32, then float8_e4m3fn: clamp to +-448, round to nearest even; int8: round
// to nearest even, saturate.
at::Tensor quantize(const at::Tensor& y, const at::Tensor& inv_scale, at::ScalarType q) {
  const at::Tensor v = y * inv_scale;
  if (q == at::kChar) return at::round(v).clamp(-128.0, 127.0).to(at::kChar);
  return v.clamp(-448.0, 448.0).to(q);
}

at::Tensor dynamic_scales(const at::Tensor& y, at::IntArrayRef normalized_shape, const at::Tensor* scale_ub,
                          at::ScalarType q) {
  at::Tensor amax = y.abs().amax(row_dims(y, normalized_shape), /*keepdim=*/true);
  if (scale_ub != nullptr) amax = at::minimum(amax, *scale_ub);
  const float qmax = q == at::kChar ? 127.f : 448.f;
  const float min_scale = q == at::kChar ? std::numeric_limits<float>::epsilon() : 1.f / (448.f * 512.f);
  // A tensor divisor: ATen on CUDA multiplies by the reciprocal of a scalar one, the kernels divide.
  return at::clamp_min(amax / at::full_like(amax, qmax), min_scale);
}

class RmsNormStaticQuantReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const rs::View v(call);
    const at::Tensor y = normed(v.x(), v.normalized_shape(), v.weight(), v.eps());
    v.q().copy_(quantize(y, v.scale().reciprocal(), v.quant_dtype()));
  }
};

class FusedAddRmsNormStaticQuantReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const fs::View v(call);
    // Computed before anything is written: residual_out may be the residual input (in place).
    const at::Tensor sum = at::add(v.x(), v.residual());
    const at::Tensor y = normed(sum, v.normalized_shape(), v.weight(), v.eps());
    v.residual_out().copy_(sum);
    v.q().copy_(quantize(y, v.scale().reciprocal(), v.quant_dtype()));
  }
};

void dynamic_quant(const at::Tensor& y, at::IntArrayRef ns, const at::Tensor* ub, at::ScalarType qd,
                   const at::Tensor& q, const at::Tensor& scales) {
  const at::Tensor s = dynamic_scales(y, ns, ub, qd);
  q.copy_(quantize(y, s.reciprocal(), qd));
  scales.copy_(s.reshape(scales.sizes()));
}

class RmsNormDynamicQuantReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const rd::View v(call);
    dynamic_quant(normed(v.x(), v.normalized_shape(), v.weight(), v.eps()), v.normalized_shape(), v.scale_ub(),
                  v.quant_dtype(), v.q(), v.scales());
  }
};

class FusedAddRmsNormDynamicQuantReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const fd::View v(call);
    const at::Tensor sum = at::add(v.x(), v.residual());
    const at::Tensor y = normed(sum, v.normalized_shape(), v.weight(), v.eps());
    v.residual_out().copy_(sum);
    dynamic_quant(y, v.normalized_shape(), v.scale_ub(), v.quant_dtype(), v.q(), v.scales());
  }
};

KernelBuilder rs_builder() { return stateless_builder<RmsNormStaticQuantReference>("rms_norm_static_quant_fwd (ATen)"); }
KernelBuilder fs_builder() {
  return stateless_builder<FusedAddRmsNormStaticQuantReference>("fused_add_rms_norm_static_quant_fwd (ATen)");
}
KernelBuilder rd_builder() {
  return stateless_builder<RmsNormDynamicQuantReference>("rms_norm_dynamic_quant_fwd (ATen)");
}
KernelBuilder fd_builder() {
  return stateless_builder<FusedAddRmsNormDynamicQuantReference>("fused_add_rms_norm_dynamic_quant_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, RMSNormStaticQuantFwdOp, rs_builder);
TILEOPS_BUILTIN_KERNEL(reference, FusedAddRMSNormStaticQuantFwdOp, fs_builder);
TILEOPS_BUILTIN_KERNEL(reference, RMSNormDynamicQuantFwdOp, rd_builder);
TILEOPS_BUILTIN_KERNEL(reference, FusedAddRMSNormDynamicQuantFwdOp, fd_builder);

}  // namespace
}  // namespace tileops::reference

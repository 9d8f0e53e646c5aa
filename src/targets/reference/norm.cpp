// The norm family (manifests/norm.yaml) on the reference target: each op's ref_api with ATen, the
// oracle of the nvrtc norm engines; float32 formulas where ATen has no op or would round in between.

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/batch_norm.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/group_norm.h>
#include <ATen/ops/instance_norm.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/rms_norm.h>
#include <ATen/ops/round.h>
#include <ATen/ops/rsqrt.h>

#include <cfloat>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "targets/builtin.h"
#include "targets/reference/norm.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {

// RMSNormFwdOp on the reference target: ref_api itself (at::rms_norm), the correctness oracle; a
// float32 weight beside a 16-bit x is written out in float32 (at::rms_norm warns on the mix).
namespace {

namespace rms_norm_fwd = tileops::ops::norm_rms_norm_fwd;

class RmsNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const rms_norm_fwd::View v(call);
    const at::Tensor* w = v.weight();
    if (w && w->scalar_type() != v.x().scalar_type()) {  // a float32 weight: in float32, rounded once to x's dtype
      const double eps = v.eps().value_or(std::numeric_limits<float>::epsilon());
      v.y().copy_(rms_norm_f32(v.x(), v.normalized_shape(), *w, 0.0, eps));
      return;
    }
    v.y().copy_(at::rms_norm(v.x(), v.normalized_shape(), maybe(w), v.eps()));
  }
};

}  // namespace

KernelBuilder rms_norm_fwd_builder() { return stateless_builder<RmsNormReference>("rms_norm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, RMSNormFwdOp, rms_norm_fwd_builder);

// FusedAddRMSNormFwdOp on the reference target: its ref_api, step by step with ATen.
namespace {

namespace fused_add_rms_norm_fwd = tileops::ops::norm_fused_add_rms_norm_fwd;

class FusedAddRmsNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const fused_add_rms_norm_fwd::View v(call);
    // Computed before anything is written: residual_out may be the residual input (in place).
    const at::Tensor sum = at::add(v.x(), v.residual());
    const at::Tensor* w = v.weight();
    const auto eps = v.eps();
    // A float32 weight beside a 16-bit x: written out in float32 (at::rms_norm would warn about the
    // mix and take its slow path anyway); eps=None is float32's epsilon, as in F.rms_norm.
    const at::Tensor y = w && w->scalar_type() != sum.scalar_type()
                             ? rms_norm_f32(sum, v.normalized_shape(), *w, 0.0, eps ? *eps : double{FLT_EPSILON})
                             : at::rms_norm(sum, v.normalized_shape(), maybe(w), eps);
    v.residual_out().copy_(sum);
    v.y().copy_(y);
  }
};

KernelBuilder fused_add_rms_norm_builder() {
  return stateless_builder<FusedAddRmsNormReference>("fused_add_rms_norm_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, FusedAddRMSNormFwdOp, fused_add_rms_norm_builder);

}  // namespace

// GemmaRMSNormFwdOp and GemmaFusedAddRMSNormFwdOp on the reference target: their ref_api with ATen,
// in float32 (norm.h).
namespace {

namespace rms = tileops::ops::norm_gemma_rms_norm_fwd;
namespace fused = tileops::ops::norm_gemma_fused_add_rms_norm_fwd;

class GemmaRmsNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const rms::View v(call);
    v.y().copy_(rms_norm_f32(v.x(), v.normalized_shape(), v.weight(), 1.0, v.eps()));
  }
};

class GemmaFusedAddRmsNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const fused::View v(call);
    // Computed before anything is written: residual_out may be the residual input (in place).
    const at::Tensor sum = at::add(v.x(), v.residual());
    const at::Tensor y = rms_norm_f32(sum, v.normalized_shape(), v.weight(), 1.0, v.eps());
    v.residual_out().copy_(sum);
    v.y().copy_(y);
  }
};

KernelBuilder gemma_rms_norm_builder() { return stateless_builder<GemmaRmsNormReference>("gemma_rms_norm_fwd (ATen)"); }
KernelBuilder gemma_fused_add_rms_norm_builder() {
  return stateless_builder<GemmaFusedAddRmsNormReference>("gemma_fused_add_rms_norm_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, GemmaRMSNormFwdOp, gemma_rms_norm_builder);
TILEOPS_BUILTIN_KERNEL(reference, GemmaFusedAddRMSNormFwdOp, gemma_fused_add_rms_norm_builder);

}  // namespace

// The quantised-output RMSNorms on the reference target (RMSNormStaticQuantFwdOp and the fused-add and
// dynamic forms): vLLM's formulas written with ATen. y = T(T(s * r) * w); q = quant(y * (1 / scale)).
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

// LayerNormFwdOp on the reference target: ref_api itself (at::layer_norm).
namespace {

namespace layer_norm_fwd = tileops::ops::norm_layer_norm_fwd;

class LayerNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const layer_norm_fwd::View v(call);
    const at::Tensor& x = v.x();
    const bool mixed = (v.weight() && v.weight()->scalar_type() != x.scalar_type()) ||
                       (v.bias() && v.bias()->scalar_type() != x.scalar_type());
    if (mixed) {  // float32 weight/bias beside a 16-bit x: torch's CUDA kernel refuses the mix, so in float32
      const auto f = [](const at::Tensor* t) { return t ? std::optional<at::Tensor>(t->to(at::kFloat)) : std::nullopt; };
      v.y().copy_(at::layer_norm(x.to(at::kFloat), v.normalized_shape(), f(v.weight()), f(v.bias()), v.eps()));
      return;
    }
    v.y().copy_(at::layer_norm(x, v.normalized_shape(), maybe(v.weight()), maybe(v.bias()), v.eps()));
  }
};

KernelBuilder layer_norm_builder() { return stateless_builder<LayerNormReference>("layer_norm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, LayerNormFwdOp, layer_norm_builder);

}  // namespace

// GroupNormFwdOp on the reference target: ref_api itself (at::group_norm).
namespace {

namespace group_norm_fwd = tileops::ops::norm_group_norm_fwd;

class GroupNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const group_norm_fwd::View v(call);
    v.y().copy_(at::group_norm(v.x(), v.num_groups(), maybe(v.weight()), maybe(v.bias()), v.eps(),
                               /*cudnn_enabled=*/false));
  }
};

KernelBuilder group_norm_builder() { return stateless_builder<GroupNormReference>("group_norm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, GroupNormFwdOp, group_norm_builder);

}  // namespace

// InstanceNormFwdOp on the reference target: at::instance_norm on the input's statistics; with
// use_input_stats=False, at::batch_norm in eval mode on the running stats (what instance_norm
// computes then), in float32 so that a 16-bit x and weight meet the float32 stats.
namespace {

namespace instance_norm_fwd = tileops::ops::norm_instance_norm_fwd;

// An optional affine tensor in float32 (InstanceNorm and BatchNorm run in float32).
std::optional<at::Tensor> as_float(const at::Tensor* t) {
  return t ? std::optional<at::Tensor>(t->to(at::kFloat)) : std::nullopt;
}

class InstanceNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const instance_norm_fwd::View v(call);
    if (v.use_input_stats()) {
      // No running stats here (the generated checks refuse them with use_input_stats): none updated.
      v.y().copy_(at::instance_norm(v.x(), maybe(v.weight()), maybe(v.bias()), std::nullopt, std::nullopt,
                                    /*use_input_stats=*/true, v.momentum(), v.eps(), /*cudnn_enabled=*/false));
      return;
    }
    // Eval mode reads the running stats and writes nothing back.
    v.y().copy_(at::batch_norm(v.x().to(at::kFloat), as_float(v.weight()), as_float(v.bias()),
                               maybe(v.running_mean()), maybe(v.running_var()), /*training=*/false, v.momentum(),
                               v.eps(), /*cudnn_enabled=*/false));
  }
};

KernelBuilder instance_norm_builder() {
  return stateless_builder<InstanceNormReference>("instance_norm_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, InstanceNormFwdOp, instance_norm_builder);

}  // namespace

// BatchNormFwdOp on the reference target: at::batch_norm on float32 x (a 16-bit x then meets float32
// statistics, and y is rounded once), which updates the given running stats in place when training.
namespace {

namespace batch_norm_fwd = tileops::ops::norm_batch_norm_fwd;

class BatchNormReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const batch_norm_fwd::View v(call);
    v.y().copy_(at::batch_norm(v.x().to(at::kFloat), as_float(v.weight()), as_float(v.bias()),
                               maybe(v.running_mean()), maybe(v.running_var()), v.training(), v.momentum(), v.eps(),
                               /*cudnn_enabled=*/false));
  }
};

KernelBuilder batch_norm_builder() { return stateless_builder<BatchNormReference>("batch_norm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, BatchNormFwdOp, batch_norm_builder);

}  // namespace

// RMSNormBwdOp on the reference target: the manifest's formula in float32 with ATen, rounded once.
// The correctness oracle for the NVRTC backward kernels.
namespace {

namespace rms_norm_bwd = tileops::ops::norm_rms_norm_bwd;

class RmsNormBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const rms_norm_bwd::View v(call);
    // F.rms_norm's eps=None is the computation dtype's epsilon (float32), not the input's.
    const double eps = v.eps().value_or(std::numeric_limits<float>::epsilon());
    const int64_t n = c10::multiply_integers(v.normalized_shape());
    const at::Tensor& dx_out = v.dx();
    const at::Tensor* dw_out = v.dweight();  // nullptr in the _without_dweight branch
    const at::Tensor x = v.x().to(at::kFloat).reshape({-1, n});
    const at::Tensor dy = v.dy().to(at::kFloat).reshape({-1, n});
    const at::Tensor* w = v.weight();

    const at::Tensor r = at::rsqrt(x.square().mean(-1, /*keepdim=*/true) + eps);
    const at::Tensor g = w ? dy * w->to(at::kFloat).reshape({n}) : dy;
    const at::Tensor dx = r * (g - x * r.square() * (g * x).mean(-1, /*keepdim=*/true));
    dx_out.copy_(dx.view(dx_out.sizes()));
    if (dw_out) dw_out->copy_((dy * x * r).sum(0).view(dw_out->sizes()));
  }
};

KernelBuilder rms_norm_bwd_builder() { return stateless_builder<RmsNormBwdReference>("rms_norm_bwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, RMSNormBwdOp, rms_norm_bwd_builder);

}  // namespace

// LayerNormBwdOp on the reference target: the manifest's formula in float32 with ATen, rounded once.
// The correctness oracle for the NVRTC backward kernels.
namespace {

namespace layer_norm_bwd = tileops::ops::norm_layer_norm_bwd;

class LayerNormBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const layer_norm_bwd::View v(call);
    const int64_t n = c10::multiply_integers(v.normalized_shape());
    const double eps = v.eps();
    const at::Tensor& dx_out = v.dx();
    const at::Tensor* dw_out = v.dweight();  // nullptr when the branch drops it
    const at::Tensor* db_out = v.dbias();
    const at::Tensor x = v.x().to(at::kFloat).reshape({-1, n});
    const at::Tensor dy = v.dy().to(at::kFloat).reshape({-1, n});
    const at::Tensor* w = v.weight();

    const at::Tensor mu = x.mean(-1, /*keepdim=*/true);
    const at::Tensor xc = x - mu;
    const at::Tensor r = at::rsqrt(xc.square().mean(-1, /*keepdim=*/true) + eps);  // biased variance
    const at::Tensor xh = xc * r;
    const at::Tensor g = w ? dy * w->to(at::kFloat).reshape({n}) : dy;
    const at::Tensor dx = r * (g - g.mean(-1, /*keepdim=*/true) - xh * (g * xh).mean(-1, /*keepdim=*/true));
    dx_out.copy_(dx.view(dx_out.sizes()));
    if (dw_out) dw_out->copy_((dy * xh).sum(0).view(dw_out->sizes()));
    if (db_out) db_out->copy_(dy.sum(0).view(db_out->sizes()));
  }
};

KernelBuilder layer_norm_bwd_builder() { return stateless_builder<LayerNormBwdReference>("layer_norm_bwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, LayerNormBwdOp, layer_norm_bwd_builder);

}  // namespace

// BatchNormBwdOp on the reference target: the manifest's formula in float32 with ATen, dx rounded once.
// Not at::native_batch_norm_backward: on CPU it divides by zero for an empty batch.
namespace {

namespace batch_norm_bwd = tileops::ops::norm_batch_norm_bwd;

class BatchNormBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const batch_norm_bwd::View v(call);
    const at::Tensor x = v.x().to(at::kFloat);
    const at::Tensor dy = v.dy().to(at::kFloat);
    const int64_t c = x.size(1);
    std::vector<int64_t> per_channel(x.dim(), 1), dims{0};
    per_channel[1] = c;
    for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
    const at::Tensor mean = v.mean().view(per_channel), rstd = v.rstd().view(per_channel);
    const at::Tensor xh = (x - mean) * rstd;
    const at::Tensor db = dy.sum(dims), dw = (dy * xh).sum(dims);
    v.dbias().copy_(db);
    v.dweight().copy_(dw);
    if (x.numel() == 0) return;  // dx is empty; the sums above are zeros
    const double m = static_cast<double>(x.numel() / c);
    const at::Tensor dx =
        v.weight().view(per_channel) * rstd * (dy - db.view(per_channel) / m - xh * dw.view(per_channel) / m);
    v.dx().copy_(dx);
  }
};

KernelBuilder batch_norm_bwd_builder() { return stateless_builder<BatchNormBwdReference>("batch_norm_bwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, BatchNormBwdOp, batch_norm_bwd_builder);

}  // namespace

}  // namespace tileops::reference

// The activation family (manifests/activation.yaml) on the reference target: the ref_api with ATen.
// Unary ops call torch's function; in the _writes_x branch y is x itself, and the result is
// computed before it is copied in. QuickGELU (no torch function) and the gated ops evaluate their
// ref_api formula in float32 and round once (what the nvrtc kernels do; evaluating it in fp16/bf16
// would round after every step).
// SigmoidFwdOp on integer/bool x: torch.sigmoid of x converted to y's dtype (float32), which is
// torch.sigmoid(x) under the default dtype, whatever the process's default dtype is.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/threshold.h>

#include <memory>
#include <string>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace gelu = tileops::ops::activation_gelu_fwd;
namespace fatrelu = tileops::ops::activation_fatrelu_and_mul_fwd;
namespace swiglu_oai = tileops::ops::activation_swiglu_oai_and_mul_fwd;
// One kernel class serves every activation op: it reads x and y through the family's shared view.
using ActivationView = tileops::ops::family::activation::View;

enum class Fn { Relu, Silu, Gelu, GeluTanh, Sigmoid, QuickGelu };

at::Tensor apply(Fn f, const at::Tensor& x) {
  switch (f) {
    case Fn::Relu: return at::relu(x);
    case Fn::Silu: return at::silu(x);
    case Fn::Gelu: return at::gelu(x, "none");
    case Fn::GeluTanh: return at::gelu(x, "tanh");
    case Fn::Sigmoid: return at::sigmoid(x);
    case Fn::QuickGelu: {
      const at::Tensor xf = x.to(at::kFloat);
      return xf * at::sigmoid(xf * 1.702);
    }
  }
  return {};
}

class UnaryReference final : public Kernel {
 public:
  explicit UnaryReference(Fn f) : f_(f) {}
  void launch(const OpCall& call) const override {
    Fn f = f_;
    if (f == Fn::Gelu && gelu::View(call).approximate() == "tanh") f = Fn::GeluTanh;
    const ActivationView v(call);
    const at::Tensor& x = v.x();
    const at::Tensor& y = v.y();
    // y's dtype is the manifest's (promote_int_to_float for sigmoid): integer x converts to it first.
    y.copy_(apply(f, x.scalar_type() == y.scalar_type() ? x : x.to(y.scalar_type())));
  }

 private:
  Fn f_;
};

// act(gate) * up over [gate | up].
class GatedReference final : public Kernel {
 public:
  explicit GatedReference(Fn f) : f_(f) {}
  void launch(const OpCall& call) const override {
    const ActivationView v(call);
    const at::Tensor x = v.x().to(at::kFloat);
    const int64_t d = x.size(-1) / 2;
    v.y().copy_(apply(f_, x.narrow(-1, 0, d)) * x.narrow(-1, d, d));
  }

 private:
  Fn f_;
};

// The gated ops with another layout or params, each its manifest formula in float32.
enum class Gated { MulAndSilu, Fatrelu, SwigluOai };

class GatedFormulaReference final : public Kernel {
 public:
  explicit GatedFormulaReference(Gated g) : g_(g) {}
  void launch(const OpCall& call) const override {
    const ActivationView v(call);
    const at::Tensor x = v.x().to(at::kFloat);
    const int64_t d = x.size(-1) / 2;
    const at::Tensor lo = x.narrow(-1, 0, d), hi = x.narrow(-1, d, d);
    at::Tensor y;
    switch (g_) {
      case Gated::MulAndSilu: y = lo * at::silu(hi); break;
      case Gated::Fatrelu: {
        // The threshold as float32, as the nvrtc kernel compares; F.threshold's `x <= t` keeps NaN.
        const float t = static_cast<float>(fatrelu::View(call).threshold());
        y = at::threshold(lo, t, 0.0) * hi;
        break;
      }
      case Gated::SwigluOai: {
        const swiglu_oai::View p(call);
        const float alpha = static_cast<float>(p.alpha()), limit = static_cast<float>(p.limit());
        const at::Tensor gate = x.slice(-1, 0, 2 * d, 2).clamp_max(limit);
        const at::Tensor up = x.slice(-1, 1, 2 * d, 2).clamp(-limit, limit);
        y = (up + 1) * (gate * at::sigmoid(gate * alpha));
        break;
      }
    }
    v.y().copy_(y);
  }

 private:
  Gated g_;
};

template <class K, auto F>
KernelBuilder builder() {
  KernelBuilder b;
  b.identity = [](const OpCall&) { return BuildKey{}; };
  b.build = [](const OpCall&, const BuildKey&) -> std::shared_ptr<const Kernel> { return std::make_shared<K>(F); };
  b.describe = [](const BuildKey&) { return std::string("activation (ATen)"); };
  return b;
}

}  // namespace

TILEOPS_BUILTIN_KERNEL(reference, ReluFwdOp, (builder<UnaryReference, Fn::Relu>));
TILEOPS_BUILTIN_KERNEL(reference, SiluFwdOp, (builder<UnaryReference, Fn::Silu>));
TILEOPS_BUILTIN_KERNEL(reference, GeluFwdOp, (builder<UnaryReference, Fn::Gelu>));
TILEOPS_BUILTIN_KERNEL(reference, SigmoidFwdOp, (builder<UnaryReference, Fn::Sigmoid>));
TILEOPS_BUILTIN_KERNEL(reference, SiluAndMulFwdOp, (builder<GatedReference, Fn::Silu>));
TILEOPS_BUILTIN_KERNEL(reference, GeluAndMulFwdOp, (builder<GatedReference, Fn::Gelu>));
TILEOPS_BUILTIN_KERNEL(reference, GeluTanhAndMulFwdOp, (builder<GatedReference, Fn::GeluTanh>));
TILEOPS_BUILTIN_KERNEL(reference, QuickGeluFwdOp, (builder<UnaryReference, Fn::QuickGelu>));
TILEOPS_BUILTIN_KERNEL(reference, MulAndSiluFwdOp, (builder<GatedFormulaReference, Gated::MulAndSilu>));
TILEOPS_BUILTIN_KERNEL(reference, FatreluAndMulFwdOp, (builder<GatedFormulaReference, Gated::Fatrelu>));
TILEOPS_BUILTIN_KERNEL(reference, SwigluOAIAndMulFwdOp, (builder<GatedFormulaReference, Gated::SwigluOai>));

}  // namespace tileops::reference

// The activation family on the nvrtc target: problem (= spec), launch and registration.
#include "targets/nvrtc/activation/activation.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

// One kernel class serves every activation op: it reads x and y through the family's shared view.
using ActivationView = tileops::ops::family::activation::View;
namespace fatrelu = tileops::ops::activation_fatrelu_and_mul_fwd;
namespace swiglu_oai = tileops::ops::activation_swiglu_oai_and_mul_fwd;



const char* act_name(Act a) {
  switch (a) {
    case Act::Relu: return "relu";
    case Act::Silu: return "silu";
    case Act::Gelu: return "gelu";
    case Act::GeluTanh: return "gelu_tanh";
    case Act::Sigmoid: return "sigmoid";
    case Act::QuickGelu: return "quick_gelu";
    case Act::FatRelu: return "fatrelu";
    case Act::SwigluOai: return "swiglu_oai";
  }
  return "?";
}

const char* layout_suffix(GateLayout l) {
  switch (l) {
    case GateLayout::First: return "";
    case GateLayout::Second: return "_up_gate";
    case GateLayout::Interleaved: return "_interleaved";
  }
  return "?";
}

// The float params a gated op passes to gated_layout_fwd as its scalars a and b (0 when unused).
using Scalars = std::array<float, 2>;
using ScalarReader = Scalars (*)(const OpCall&);
Scalars no_scalars(const OpCall&) { return {0.f, 0.f}; }
Scalars fatrelu_scalars(const OpCall& call) { return {static_cast<float>(fatrelu::View(call).threshold()), 0.f}; }
Scalars swiglu_oai_scalars(const OpCall& call) {
  const swiglu_oai::View v(call);
  return {static_cast<float>(v.alpha()), static_cast<float>(v.limit())};
}

class ActivationKernel final : public Kernel {
 public:
  // cap: most CTAs a launch (tuning: act_ctas_per_sm per SM; by default none).
  ActivationKernel(LoadedKernel k, ActivationSpec p, int sms, long long cap, ScalarReader scalars)
      : k_(std::move(k)), p_(p), sms_(sms), cap_(cap), scalars_(scalars) {}
  void launch(const OpCall& call) const override {
    const ActivationView v(call);
    const at::Tensor& x = v.x();
    const void* xp = x.const_data_ptr();
    void* yp = v.y().mutable_data_ptr();
    long long n = x.numel(), d = p_.gated ? x.size(-1) / 2 : 0, rows = p_.gated ? n / x.size(-1) : 0;
    const long long vecs = (p_.gated ? rows * d : n) / p_.vec;
    const ActivationLaunch at = activation_launch(vecs, sms_, cap_);
    Scalars ab = scalars_(call);
    void* unary_args[] = {&xp, &yp, &n};
    void* gated_args[] = {&xp, &yp, &rows, &d, &ab[0], &ab[1]};  // the scalars only for gated_layout_fwd
    nvrtc::launch(k_, static_cast<unsigned>(at.grid), at.threads, 0, p_.gated ? gated_args : unary_args);
  }

 private:
  LoadedKernel k_;
  ActivationSpec p_;
  int sms_;
  long long cap_;
  ScalarReader scalars_;
};

struct ActivationFamily {
  using Problem = ActivationProblem;
  using Spec = ActivationSpec;
  bool gated;
  Act fixed_act;
  bool gelu_param;  // GeluFwdOp reads its activation from the `approximate` param
  GateLayout layout;
  ScalarReader scalars;

  Problem problem(const OpCall& call) const {
    const ActivationView v(call);
    const at::Tensor& x = v.x();
    const at::Tensor& y = v.y();
    // choices: none | tanh (checked by the generated boundary)
    const Act act = gelu_param && tileops::ops::activation_gelu_fwd::View(call).approximate() == "tanh" ? Act::GeluTanh
                                                                                                       : fixed_act;
    const int vec = gated ? activation_vec(x.scalar_type(), x.size(-1) / 2, {x.const_data_ptr(), y.const_data_ptr()})
                          : unary_vec(x.scalar_type(), y.scalar_type(), x.const_data_ptr(), y.const_data_ptr());
    return ActivationProblem{x.scalar_type(), act, gated, vec,
                             y.scalar_type() == x.scalar_type() ? c10::ScalarType::Undefined : y.scalar_type(), layout};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const {
    return Spec{q.dtype, q.act, q.gated, q.vec, q.out_dtype, q.layout, dev.arch, t.act_ctas_per_sm};
  }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    return std::make_shared<ActivationKernel>(
        std::move(k[0]), s, dev.sm_count,
        s.ctas_per_sm > 0 ? static_cast<long long>(s.ctas_per_sm) * dev.sm_count : 0x7fffffffLL, scalars);
  }
};

KernelBuilder activation_builder(bool gated, Act fixed_act, bool gelu_param = false,
                                 GateLayout layout = GateLayout::First, ScalarReader scalars = no_scalars) {
  return spec_builder(ActivationFamily{gated, fixed_act, gelu_param, layout, scalars});
}

KernelBuilder relu_fwd_builder() { return activation_builder(false, Act::Relu); }
KernelBuilder silu_fwd_builder() { return activation_builder(false, Act::Silu); }
KernelBuilder gelu_fwd_builder() { return activation_builder(false, Act::Gelu, true); }
KernelBuilder sigmoid_fwd_builder() { return activation_builder(false, Act::Sigmoid); }
KernelBuilder silu_and_mul_fwd_builder() { return activation_builder(true, Act::Silu); }
KernelBuilder gelu_and_mul_fwd_builder() { return activation_builder(true, Act::Gelu); }
KernelBuilder gelu_tanh_and_mul_fwd_builder() { return activation_builder(true, Act::GeluTanh); }
KernelBuilder quick_gelu_fwd_builder() { return activation_builder(false, Act::QuickGelu); }
KernelBuilder mul_and_silu_fwd_builder() { return activation_builder(true, Act::Silu, false, GateLayout::Second); }
KernelBuilder fatrelu_and_mul_fwd_builder() {
  return activation_builder(true, Act::FatRelu, false, GateLayout::First, fatrelu_scalars);
}
KernelBuilder swiglu_oai_and_mul_fwd_builder() {
  return activation_builder(true, Act::SwigluOai, false, GateLayout::Interleaved, swiglu_oai_scalars);
}

}  // namespace

ActivationLaunch activation_launch(long long vecs, int sms, long long cap) {
  const long long per_cta = static_cast<long long>(kActivationThreads) * kActivationUnroll;
  const long long trips = (vecs + per_cta - 1) / per_cta;
  if (trips >= sms) return {std::clamp<long long>(trips, 1, cap), kActivationThreads};
  const long long spread = std::min<long long>((vecs + kActivationSmallThreads - 1) / kActivationSmallThreads, sms);
  return {std::clamp<long long>(spread, 1, cap), kActivationSmallThreads};
}

int activation_vec(c10::ScalarType dtype, int64_t divisor, std::initializer_list<const void*> ptrs) {
  const int elem = static_cast<int>(c10::elementSize(dtype));
  uintptr_t bits = 0;
  for (const void* p : ptrs) bits |= reinterpret_cast<uintptr_t>(p);
  int vec = 16 / elem;
  while (vec > 1 && (bits % (vec * elem) != 0 || (divisor != 0 && divisor % vec != 0))) vec /= 2;
  return vec;
}

int unary_vec(c10::ScalarType x_dtype, c10::ScalarType y_dtype, const void* x, const void* y) {
  const int ei = static_cast<int>(c10::elementSize(x_dtype)), eo = static_cast<int>(c10::elementSize(y_dtype));
  const auto xb = reinterpret_cast<uintptr_t>(x), yb = reinterpret_cast<uintptr_t>(y);
  // A step of vec elements loads min(vec * ei, 16) bytes of x at a time and stores min(vec * eo, 16)
  // of y. It is sized by y: stepping by a narrower x (uint8 -> float32 at 16 a step) gave each thread
  // so many elements that a whole call was one wave with no loads left to overlap the math.
  int vec = 16 / eo;
  while (vec > 1 && (xb % std::min(vec * ei, 16) != 0 || yb % std::min(vec * eo, 16) != 0)) vec /= 2;
  return vec;
}

std::vector<jit::KernelSource> ActivationSpec::sources() const { return {activation_source(*this, arch)}; }
std::string ActivationSpec::describe() const {
  return std::string(gated ? (layout_kernel() ? "gated_layout_fwd(dtype=" : "gated_fwd(dtype=") : "unary_fwd(dtype=") +
         short_type_name(dtype) + (y_dtype() == dtype ? "" : std::string("->") + short_type_name(y_dtype())) +
         ", act=" + act_name(act) + layout_suffix(layout) + ", vec=" + std::to_string(vec) + ")";
}

std::string activation_name(const ActivationSpec& p, const std::string& arch) {
  std::string types = short_type_name(p.dtype);
  if (p.y_dtype() != p.dtype) types += std::string("_") + short_type_name(p.y_dtype());  // e.g. i32_f32
  return std::string(p.gated ? "gated_fwd__" : "unary_fwd__") + act_name(p.act) + layout_suffix(p.layout) + "__" +
         types + "__v" + std::to_string(p.vec) + "__" + arch;
}

jit::KernelSource activation_source(const ActivationSpec& p, const std::string& arch) {
  TORCH_CHECK(!p.gated || p.y_dtype() == p.dtype, "tileops: the gated activation kernel keeps x's dtype");
  const std::string types = p.gated ? kernel_type_name(p.dtype)
                                    : std::string(kernel_type_name(p.dtype)) + ", " + kernel_type_name(p.y_dtype());
  const std::string kernel = p.layout_kernel() ? "tileops::gated_layout_fwd<" :
                             p.gated             ? "tileops::gated_fwd<" : "tileops::unary_fwd<";
  const std::string layout = p.layout_kernel() ? std::to_string(static_cast<int>(p.layout)) + ", " : "";
  const std::string expr = kernel + types + ", " + std::to_string(static_cast<int>(p.act)) + ", " + layout +
                           std::to_string(p.vec) + ", " + std::to_string(kActivationUnroll) + ">";
  return make_source(activation_name(p, arch), p.gated ? "activation/gated_fwd.cuh" : "activation/unary_fwd.cuh", expr,
                     arch);
}

TILEOPS_BUILTIN_KERNEL(nvrtc, ReluFwdOp, relu_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, SiluFwdOp, silu_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, GeluFwdOp, gelu_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, SigmoidFwdOp, sigmoid_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, SiluAndMulFwdOp, silu_and_mul_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, GeluAndMulFwdOp, gelu_and_mul_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, GeluTanhAndMulFwdOp, gelu_tanh_and_mul_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, QuickGeluFwdOp, quick_gelu_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, MulAndSiluFwdOp, mul_and_silu_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, FatreluAndMulFwdOp, fatrelu_and_mul_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, SwigluOAIAndMulFwdOp, swiglu_oai_and_mul_fwd_builder);

}  // namespace tileops::nvrtc

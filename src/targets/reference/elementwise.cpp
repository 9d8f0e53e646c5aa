// The elementwise family (manifests/elementwise.yaml) on the reference target: each entry's ref_api
// with ATen, one line per op. The result is computed first, then copied into the output (which is
// the written input in the in-place branch) in the output's dtype.
#include <ATen/core/Tensor.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/bitwise_not.h>
#include <ATen/ops/bitwise_or.h>
#include <ATen/ops/bitwise_xor.h>
#include <ATen/ops/ceil.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/div.h>
#include <ATen/ops/elu.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/erf.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/expm1.h>
#include <ATen/ops/floor.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/hardsigmoid.h>
#include <ATen/ops/hardswish.h>
#include <ATen/ops/hardtanh.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/isinf.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/le.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/lerp.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mish.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/nan_to_num.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/prelu.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/round.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/selu.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/softplus.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/trunc.h>
#include <ATen/ops/where.h>

#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <cmath>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/elementwise.h"

namespace tileops::reference {
namespace {

using In = c10::ArrayRef<at::Tensor>;

at::Scalar scalar_of(const ParamValue& v) {
  switch (v.kind()) {
    case ParamValue::Kind::Int: return at::Scalar(v.as_int());
    case ParamValue::Kind::Bool: return at::Scalar(v.as_bool());
    default: return at::Scalar(v.as_real());
  }
}

// A call's params as the ATen calls take them: p[j] a Scalar, p.opt(j) a Scalar or None, p.str(j).
class Ps {
 public:
  explicit Ps(c10::ArrayRef<ParamValue> v) : v_(v) {}
  at::Scalar operator[](size_t j) const { return scalar_of(v_[j]); }
  std::optional<at::Scalar> opt(size_t j) const {
    return v_[j].is_none() ? std::nullopt : std::optional<at::Scalar>(scalar_of(v_[j]));
  }
  std::optional<double> real(size_t j) const {
    return v_[j].is_none() ? std::nullopt : std::optional<double>(scalar_of(v_[j]).toDouble());
  }
  std::optional<c10::string_view> str(size_t j) const {
    if (v_[j].is_none()) return std::nullopt;
    const std::string_view s = v_[j].as_str();
    return c10::string_view(s.data(), s.size());
  }

 private:
  c10::ArrayRef<ParamValue> v_;
};
using RefFn = at::Tensor (*)(In, Ps);

// An optional input of an entry (absent: an undefined tensor) as ATen takes it.
std::optional<at::Tensor> optional_of(const at::Tensor& t) { return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt; }

// torch.div; with a rounding mode on integers, min / -1 is min (two's complement), where torch's CPU
// kernel traps for int32 and int64 and takes the process down.
at::Tensor div_ref(In x, Ps p) {
  const auto mode = p.str(0);
  if (!mode.has_value()) return at::div(x[0], x[1]);
  const c10::ScalarType t = at::result_type(x[0], x[1]);
  const bool signed_int = c10::isIntegralType(t, false) && t != at::kByte && x[1].scalar_type() != at::kByte;
  if (signed_int) {  // where() rather than a host check: no device sync
    const at::Tensor minus_one = at::eq(x[1], -1);
    const at::Tensor q = at::div(x[0], at::where(minus_one, at::ones_like(x[1]), x[1]), mode);
    return at::where(minus_one, at::neg(x[0].to(t)), q);
  }
  return at::div(x[0], x[1], mode);
}

// torch.clamp with Scalar bounds: a NaN bound gives NaN everywhere (torch 2.14, and CUDA), which
// torch 2.11's CPU kernel skips when the other bound is None.
at::Tensor clamp_ref(In x, Ps p) {
  const auto lo = p.opt(0), hi = p.opt(1);
  at::Tensor y = at::clamp(x[0], lo, hi);
  auto nan = [](const std::optional<at::Scalar>& b) { return b && b->isFloatingPoint() && std::isnan(b->toDouble()); };
  if (y.is_floating_point() && (nan(lo) || nan(hi))) y.fill_(std::numeric_limits<double>::quiet_NaN());
  return y;
}

// class -> ref_api. A manifest entry without a line here has no reference kernel (a test lists them).
const std::unordered_map<std::string_view, RefFn>& refs() {
  static const std::unordered_map<std::string_view, RefFn> m = {
      {"AddFwdOp", [](In x, Ps p) { return at::add(x[0], x[1], p[0]); }},
      {"GtFwdOp", [](In x, Ps) { return at::gt(x[0], x[1]); }},
      {"ExpFwdOp", [](In x, Ps) { return at::exp(x[0]); }},
      {"SqrtFwdOp", [](In x, Ps) { return at::sqrt(x[0]); }},
      {"WhereFwdOp", [](In x, Ps) { return at::where(x[0], x[1], x[2]); }},
      {"ClampScalarFwdOp", clamp_ref},
      {"ClampMinFwdOp", [](In x, Ps p) { return at::clamp_min(x[0], p[0]); }},
      {"ClampMaxFwdOp", [](In x, Ps p) { return at::clamp_max(x[0], p[0]); }},
      {"NanToNumFwdOp", [](In x, Ps p) { return at::nan_to_num(x[0], p.real(0), p.real(1), p.real(2)); }},
      // the engine hands the weight over viewed along dim 1 ([C, 1, ...]); prelu takes it flat
      {"PreluFwdOp", [](In x, Ps) { return at::prelu(x[0], x[1].reshape({-1})); }},
      {"LogFwdOp", [](In x, Ps) { return at::log(x[0]); }},
      {"RsqrtFwdOp", [](In x, Ps) { return at::rsqrt(x[0]); }},
      {"AbsFwdOp", [](In x, Ps) { return at::abs(x[0]); }},
      {"NegFwdOp", [](In x, Ps) { return at::neg(x[0]); }},
      {"ReciprocalFwdOp", [](In x, Ps) { return at::reciprocal(x[0]); }},
      {"SignFwdOp", [](In x, Ps) { return at::sign(x[0]); }},
      {"SinFwdOp", [](In x, Ps) { return at::sin(x[0]); }},
      {"CosFwdOp", [](In x, Ps) { return at::cos(x[0]); }},
      {"FloorFwdOp", [](In x, Ps) { return at::floor(x[0]); }},
      {"CeilFwdOp", [](In x, Ps) { return at::ceil(x[0]); }},
      // torch.round takes decimals for floating inputs only
      {"RoundFwdOp", [](In x, Ps p) { return p[0].toLong() == 0 ? at::round(x[0]) : at::round(x[0], p[0].toLong()); }},
      {"TruncFwdOp", [](In x, Ps) { return at::trunc(x[0]); }},
      {"ErfFwdOp", [](In x, Ps) { return at::erf(x[0]); }},
      {"Log1pFwdOp", [](In x, Ps) { return at::log1p(x[0]); }},
      {"Expm1FwdOp", [](In x, Ps) { return at::expm1(x[0]); }},
      {"TanhFwdOp", [](In x, Ps) { return at::tanh(x[0]); }},
      {"LogicalNotFwdOp", [](In x, Ps) { return at::logical_not(x[0]); }},
      {"BitwiseNotFwdOp", [](In x, Ps) { return at::bitwise_not(x[0]); }},
      {"IsnanFwdOp", [](In x, Ps) { return at::isnan(x[0]); }},
      {"IsinfFwdOp", [](In x, Ps) { return at::isinf(x[0]); }},
      {"IsfiniteFwdOp", [](In x, Ps) { return at::isfinite(x[0]); }},
      {"HardswishFwdOp", [](In x, Ps) { return at::hardswish(x[0]); }},
      {"HardsigmoidFwdOp", [](In x, Ps) { return at::hardsigmoid(x[0]); }},
      {"MishFwdOp", [](In x, Ps) { return at::mish(x[0]); }},
      {"SeluFwdOp", [](In x, Ps) { return at::selu(x[0]); }},
      {"LeakyReluFwdOp", [](In x, Ps p) { return at::leaky_relu(x[0], p[0]); }},
      {"EluFwdOp", [](In x, Ps p) { return at::elu(x[0], p[0]); }},
      {"HardtanhFwdOp", [](In x, Ps p) { return at::hardtanh(x[0], p[0], p[1]); }},
      {"SoftplusFwdOp", [](In x, Ps p) { return at::softplus(x[0], p[0], p[1]); }},
      {"SubFwdOp", [](In x, Ps p) { return at::sub(x[0], x[1], p[0]); }},
      {"MulFwdOp", [](In x, Ps) { return at::mul(x[0], x[1]); }},
      {"DivFwdOp", div_ref},
      {"RemainderFwdOp", [](In x, Ps) { return at::remainder(x[0], x[1]); }},
      {"PowFwdOp", [](In x, Ps) { return at::pow(x[0], x[1]); }},
      {"FloorDivideFwdOp", [](In x, Ps) { return at::floor_divide(x[0], x[1]); }},
      {"LerpFwdOp", [](In x, Ps p) { return at::lerp(x[0], x[1], p[0]); }},
      {"MaximumFwdOp", [](In x, Ps) { return at::maximum(x[0], x[1]); }},
      {"MinimumFwdOp", [](In x, Ps) { return at::minimum(x[0], x[1]); }},
      {"EqFwdOp", [](In x, Ps) { return at::eq(x[0], x[1]); }},
      {"NeFwdOp", [](In x, Ps) { return at::ne(x[0], x[1]); }},
      {"LtFwdOp", [](In x, Ps) { return at::lt(x[0], x[1]); }},
      {"GeFwdOp", [](In x, Ps) { return at::ge(x[0], x[1]); }},
      {"LeFwdOp", [](In x, Ps) { return at::le(x[0], x[1]); }},
      {"LogicalAndFwdOp", [](In x, Ps) { return at::logical_and(x[0], x[1]); }},
      {"LogicalOrFwdOp", [](In x, Ps) { return at::logical_or(x[0], x[1]); }},
      {"BitwiseAndFwdOp", [](In x, Ps) { return at::bitwise_and(x[0], x[1]); }},
      {"BitwiseOrFwdOp", [](In x, Ps) { return at::bitwise_or(x[0], x[1]); }},
      {"BitwiseXorFwdOp", [](In x, Ps) { return at::bitwise_xor(x[0], x[1]); }},
      {"MaskedFillScalarFwdOp", [](In x, Ps p) { return at::masked_fill(x[0], x[1], p[0]); }},
      {"MaskedFillFwdOp", [](In x, Ps) { return at::masked_fill(x[0], x[1], x[2]); }},
      {"LerpTensorFwdOp", [](In x, Ps) { return at::lerp(x[0], x[1], x[2]); }},
      // min or max may be absent (undefined), not both (the manifest's rule)
      {"ClampFwdOp", [](In x, Ps) { return at::clamp(x[0], optional_of(x[1]), optional_of(x[2])); }},
  };
  return m;
}

class EwReference final : public Kernel {
 public:
  explicit EwReference(RefFn f) : f_(f) {}
  void launch(const OpCall& call) const override {
    const at::Tensor r = f_(call.inputs, Ps(call.params));
    call.outputs[0].copy_(r);
  }

 private:
  RefFn f_;
};

template <int I>
KernelBuilder ew_builder() {
  KernelBuilder b;
  b.identity = [](const OpCall&) { return BuildKey{}; };
  b.build = [](const OpCall&, const BuildKey&) -> std::shared_ptr<const Kernel> {
    return std::make_shared<EwReference>(refs().at(elementwise::kOps[I].cls));
  };
  b.describe = [](const BuildKey&) { return std::string("elementwise ") + elementwise::kOps[I].cls + " (ATen)"; };
  return b;
}

template <int... I>
void register_all(std::integer_sequence<int, I...>) {
  ((refs().count(elementwise::kOps[I].cls)
        ? registry::builtin_kernels().push_back({"reference", elementwise::kOps[I].cls, &ew_builder<I>})
        : void()),
   ...);
}

[[maybe_unused]] const bool kRegistered = [] {
  if (elementwise::kOps[0].cls != nullptr) register_all(std::make_integer_sequence<int, elementwise::kNumOps>{});
  return true;
}();

}  // namespace

}  // namespace tileops::reference

// The elementwise family (manifests/elementwise.yaml) on the reference target: each entry's ref_api
// with ATen, one line per op. The result is computed first, then copied into the output (which is
// the written input in the in-place branch) in the output's dtype.
#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/elementwise.h"

namespace tileops::reference {
namespace {

using In = c10::ArrayRef<at::Tensor>;
using Ps = c10::ArrayRef<at::Scalar>;
using RefFn = at::Tensor (*)(In, Ps);

// class -> ref_api. A manifest entry without a line here has no reference kernel (a test lists them).
const std::unordered_map<std::string_view, RefFn>& refs() {
  static const std::unordered_map<std::string_view, RefFn> m = {
      {"AddFwdOp", [](In x, Ps p) { return at::add(x[0], x[1], p[0]); }},
      {"GtFwdOp", [](In x, Ps) { return at::gt(x[0], x[1]); }},
      {"ExpFwdOp", [](In x, Ps) { return at::exp(x[0]); }},
      {"SqrtFwdOp", [](In x, Ps) { return at::sqrt(x[0]); }},
      {"WhereFwdOp", [](In x, Ps) { return at::where(x[0], x[1], x[2]); }},
      {"ClampScalarFwdOp", [](In x, Ps p) { return at::clamp(x[0], p[0], p[1]); }},
  };
  return m;
}

at::Scalar scalar_of(const ParamValue& v) {
  switch (v.kind()) {
    case ParamValue::Kind::Int: return at::Scalar(v.as_int());
    case ParamValue::Kind::Bool: return at::Scalar(v.as_bool());
    default: return at::Scalar(v.as_real());
  }
}

class EwReference final : public Kernel {
 public:
  explicit EwReference(RefFn f) : f_(f) {}
  void launch(const OpCall& call) const override {
    std::array<at::Scalar, elementwise::kMaxParams> ps;
    for (size_t j = 0; j < call.params.size(); ++j) ps[j] = scalar_of(call.params[j]);
    const at::Tensor r = f_(call.inputs, Ps(ps.data(), call.params.size()));
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

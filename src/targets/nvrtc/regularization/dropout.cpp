// DropoutFwdOp and DropoutBwdOp on the nvrtc target: problem, plan, launch and registration.
#include "targets/nvrtc/regularization/dropout.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"
#include "targets/regularization_dropout_rule.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace fwd = tileops::ops::regularization_dropout_fwd;
namespace bwd = tileops::ops::regularization_dropout_bwd;

DropoutArgs fwd_args(const OpCall& call) {
  const fwd::View v(call);
  return {v.input(), v.output(), v.p(), v.seed(), v.training()};
}

DropoutArgs bwd_args(const OpCall& call) {
  const bwd::View v(call);
  return {v.doutput(), v.dinput(), v.p(), v.seed(), v.training()};
}

class DropoutKernel final : public Kernel {
 public:
  DropoutKernel(LoadedKernel k, DropoutSpec s, DropoutArgs (*args)(const OpCall&))
      : k_(std::move(k)), s_(std::move(s)), args_(args) {}
  void launch(const OpCall& call) const override {
    const DropoutArgs a = args_(call);
    long long n = a.x.numel();
    if (n == 0) return;
    const void* xp = a.x.const_data_ptr();
    void* yp = a.y.mutable_data_ptr();
    const DropoutRule rule = dropout_rule(a.p, a.training);
    unsigned long long seed = static_cast<unsigned long long>(a.seed);
    unsigned drop_below = rule.drop_below;
    float scale = rule.scale;
    // A thread owns max(vec, 4) elements; the grid stays within 2^31 - 1 CTAs below 2^41 elements.
    const long long per_cta = static_cast<long long>(kDropoutCtaThreads) * std::max(s_.vec, 4);
    const long long grid = (n + per_cta - 1) / per_cta;
    void* args[] = {&xp, &yp, &n, &seed, &drop_below, &scale};
    nvrtc::launch(k_, static_cast<unsigned>(grid), kDropoutCtaThreads, 0, args);
  }

 private:
  LoadedKernel k_;
  DropoutSpec s_;
  DropoutArgs (*args_)(const OpCall&);
};

KernelBuilder dropout_fwd_builder() { return spec_builder(DropoutFamily{fwd_args}); }
KernelBuilder dropout_bwd_builder() { return spec_builder(DropoutFamily{bwd_args}); }

}  // namespace

DropoutProblem DropoutFamily::problem(const OpCall& call) const {
  const DropoutArgs a = args(call);
  const int elem = static_cast<int>(c10::elementSize(a.x.scalar_type()));
  return DropoutProblem{a.x.scalar_type(), access_width({a.x.const_data_ptr(), a.y.const_data_ptr()}, elem)};
}

DropoutSpec DropoutFamily::plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const {
  return DropoutSpec{q.dtype, q.vec, dev.arch};
}

std::shared_ptr<const Kernel> DropoutFamily::make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo&) const {
  return std::make_shared<DropoutKernel>(std::move(k[0]), s, args);
}

std::vector<jit::KernelSource> DropoutSpec::sources() const {
  const std::string name =
      std::string("dropout_fwd__") + short_type_name(dtype) + "__v" + std::to_string(vec) + "__" + arch;
  const std::string expr =
      std::string("tileops::dropout_fwd<") + kernel_type_name(dtype) + ", " + std::to_string(vec) + ">";
  return {make_source(name, "regularization/dropout_fwd.cuh", expr, arch)};
}

std::string DropoutSpec::describe() const {
  return std::string("dropout_fwd(dtype=") + short_type_name(dtype) + ", vec=" + std::to_string(vec) + ")";
}

TILEOPS_BUILTIN_KERNEL(nvrtc, DropoutFwdOp, dropout_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, DropoutBwdOp, dropout_bwd_builder);

}  // namespace tileops::nvrtc

// AlibiFwdOp on the nvrtc target: one tiny kernel per device (no specialisation needed).
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::position_alibi_fwd;

class AlibiKernel final : public Kernel {
 public:
  explicit AlibiKernel(LoadedKernel k) : k_(std::move(k)) {}
  void launch(const OpCall& call) const override {
    const op::View v(call);
    float* out = v.slopes().mutable_data_ptr<float>();
    int heads = static_cast<int>(v.num_heads());
    void* args[] = {&out, &heads};
    nvrtc::launch(k_, static_cast<unsigned>((heads + 127) / 128), 128, 0, args);
  }

 private:
  LoadedKernel k_;
};

struct AlibiProblem {
  TILEOPS_IDENTITY(AlibiProblem)  // no fields: one problem
};
struct AlibiSpec {
  std::string arch;
  TILEOPS_IDENTITY(AlibiSpec, arch)
  std::vector<jit::KernelSource> sources() const {
    return {make_source("alibi_slopes_fwd__" + arch, "position/alibi_fwd.cuh", "tileops::alibi_slopes_fwd", arch)};
  }
  std::string describe() const { return "alibi_slopes_fwd"; }
};

struct AlibiFamily {
  using Problem = AlibiProblem;
  using Spec = AlibiSpec;
  Problem problem(const OpCall&) const { return {}; }
  Spec plan(const Problem&, const DeviceFacts& dev, const Tuning&) const { return {dev.arch}; }
  std::shared_ptr<const Kernel> make(const Spec&, std::vector<LoadedKernel> k, const DeviceInfo&) const {
    return std::make_shared<AlibiKernel>(std::move(k[0]));
  }
};

KernelBuilder alibi_builder() { return spec_builder(AlibiFamily{}); }
TILEOPS_BUILTIN_KERNEL(nvrtc, AlibiFwdOp, alibi_builder);

}  // namespace
}  // namespace tileops::nvrtc

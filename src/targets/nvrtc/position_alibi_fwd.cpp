// AlibiFwdOp on the nvrtc target: one tiny kernel per device (no specialisation needed).
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::position_alibi_fwd;

class AlibiKernel final : public Kernel {
 public:
  explicit AlibiKernel(LoadedKernel k) : k_(std::move(k)) {}
  void launch(const OpCall& call) const override {
    float* out = call.outputs[op::slopes].mutable_data_ptr<float>();
    int heads = static_cast<int>(call.params[op::num_heads].as_int());
    void* args[] = {&out, &heads};
    nvrtc::launch(k_, static_cast<unsigned>((heads + 127) / 128), 128, 0, args);
  }

 private:
  LoadedKernel k_;
};

KernelBuilder alibi_builder() {
  KernelBuilder b;
  b.identity = [](const OpCall& call) {
    TORCH_CHECK(call.device.is_cuda(), "target 'nvrtc' serves CUDA devices only, got ", call.device);
    return BuildKey{};
  };
  b.build = [](const OpCall& call, const BuildKey&) -> std::shared_ptr<const Kernel> {
    const DeviceInfo& dev = device_info(call.device.index());
    auto src = make_source("alibi_slopes_fwd__" + dev.arch, "position/alibi_fwd.cuh", "tileops::alibi_slopes_fwd",
                           dev.arch);
    return std::make_shared<AlibiKernel>(load(src, call.device.index()));
  };
  b.describe = [](const BuildKey&) { return std::string("alibi_slopes_fwd"); };
  return b;
}
TILEOPS_BUILTIN_KERNEL(nvrtc, AlibiFwdOp, alibi_builder);

}  // namespace
}  // namespace tileops::nvrtc

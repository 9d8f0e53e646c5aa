// SinusoidalFwdOp on the nvrtc target.
#include "targets/nvrtc/position_sinusoidal_fwd.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::position_sinusoidal_fwd;

class SinusoidalKernel final : public Kernel {
 public:
  SinusoidalKernel(LoadedKernel k, int vec) : k_(std::move(k)), vec_(vec) {}
  void launch(const OpCall& call) const override {
    const at::Tensor& out = call.outputs[op::table];
    void* ptr = out.mutable_data_ptr();
    long long num_vecs = out.numel() / vec_;
    int dim = static_cast<int>(call.params[op::dim].as_int());
    double log2_base = std::log2(call.params[op::base].as_real());
    void* args[] = {&ptr, &num_vecs, &dim, &log2_base};
    const long long grid = (num_vecs + 255) / 256;
    TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": table too large (", out.numel(), " elements) for one launch");
    nvrtc::launch(k_, static_cast<unsigned>(grid), 256, 0, args);
  }

 private:
  LoadedKernel k_;
  int vec_;
};

KernelBuilder sinusoidal_builder() {
  KernelBuilder b;
  // Build identity: (dtype, access width); dim and base are launch arguments.
  b.identity = [](const OpCall& call) {
    TORCH_CHECK(call.device.is_cuda(), "target 'nvrtc' serves CUDA devices only, got ", call.device);
    const at::Tensor& out = call.outputs[op::table];
    TORCH_CHECK(call.params[op::dim].as_int() <= 0x7fffffffLL, call.op_name, ": dim too large");
    const auto bits = reinterpret_cast<uintptr_t>(out.data_ptr());
    int bytes = 16;
    while (bytes > 1 && bits % bytes != 0) bytes /= 2;
    const int max_vec = std::max(1, bytes / static_cast<int>(out.element_size()));
    return BuildKey{static_cast<int64_t>(out.scalar_type()),
                    sinusoidal_vec(out.scalar_type(), call.params[op::dim].as_int(), max_vec)};
  };
  b.build = [](const OpCall& call, const BuildKey& key) -> std::shared_ptr<const Kernel> {
    const int device = call.device.index();
    const int vec = static_cast<int>(key.words[1]);
    auto src = sinusoidal_source(static_cast<c10::ScalarType>(key.words[0]), vec, device_info(device).arch);
    return std::make_shared<SinusoidalKernel>(load(src, device), vec);
  };
  b.describe = [](const BuildKey& key) {
    return "sinusoidal_fwd(dtype=" + std::string(c10::toString(static_cast<c10::ScalarType>(key.words[0]))) +
           ", vec=" + std::to_string(key.words[1]) + ")";
  };
  return b;
}

}  // namespace

int sinusoidal_vec(c10::ScalarType dtype, int64_t dim, int max_vec) {
  // A pair (sin, cos) is the smallest unit; the manifest guarantees an even dim.
  int vec = std::max(2, std::min(16 / static_cast<int>(c10::elementSize(dtype)), max_vec));
  while (vec > 2 && dim % vec != 0) vec /= 2;
  return vec;
}

jit::KernelSource sinusoidal_source(c10::ScalarType dtype, int vec, const std::string& arch) {
  const char* t = dtype == c10::kHalf ? "tileops::f16" : dtype == c10::kBFloat16 ? "tileops::bf16" : "float";
  TORCH_CHECK(dtype == c10::kHalf || dtype == c10::kBFloat16 || dtype == c10::kFloat,
              "tileops: sinusoidal_fwd has no kernel for dtype ", dtype);
  const char* s = dtype == c10::kHalf ? "f16" : dtype == c10::kBFloat16 ? "bf16" : "f32";
  return make_source(std::string("sinusoidal_fwd__") + s + "__v" + std::to_string(vec) + "__" + arch,
                     "position/sinusoidal_fwd.cuh",
                     std::string("tileops::sinusoidal_fwd<") + t + ", " + std::to_string(vec) + ">", arch);
}

TILEOPS_BUILTIN_KERNEL(nvrtc, SinusoidalFwdOp, sinusoidal_builder);

}  // namespace tileops::nvrtc

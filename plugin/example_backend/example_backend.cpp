// Example out-of-tree target "example_cpu": RMSNormFwdOp on CPU with a plain C++ loop.
// It shows the whole backend contract: a detector, a kernel builder per op with its build
// identity, and registration that is all-or-nothing.
//
// Its detector claims CPU devices only when TILEOPS_EXAMPLE_CLAIM_CPU=1, so that loading it does
// not change which target serves CPU unless asked; target="example_cpu" always reaches it.
#include <tileops/target.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>

namespace {

class RmsNormLoop final : public tileops::Kernel {
 public:
  explicit RmsNormLoop(int64_t n) : n_(n) {}
  void launch(const tileops::OpCall& call) const override {
    // Inputs arrive contiguous, outputs allocated: x, weight (maybe undefined) -> y.
    const at::Tensor x = call.inputs[0].to(at::kFloat);
    const at::Tensor w = call.inputs[1].defined() ? call.inputs[1].to(at::kFloat) : at::Tensor();
    const auto eps_opt = call.params[1].as_optional_real();
    const float eps = eps_opt ? static_cast<float>(*eps_opt) : std::numeric_limits<float>::epsilon();
    at::Tensor y = at::empty_like(x);
    const float* xp = x.const_data_ptr<float>();
    const float* wp = w.defined() ? w.const_data_ptr<float>() : nullptr;
    float* yp = y.mutable_data_ptr<float>();
    const int64_t rows = x.numel() / n_;
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < n_; ++i) ss += double(xp[r * n_ + i]) * xp[r * n_ + i];
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / n_) + eps);
      for (int64_t i = 0; i < n_; ++i) yp[r * n_ + i] = xp[r * n_ + i] * inv * (wp ? wp[i] : 1.0f);
    }
    call.outputs[0].copy_(y);
  }

 private:
  int64_t n_;
};

tileops::KernelBuilder rms_norm_builder() {
  tileops::KernelBuilder b;
  b.identity = [](const tileops::OpCall& call) {
    TORCH_CHECK(call.device.is_cpu(), "target 'example_cpu' serves CPU tensors only, got ", call.device);
    // A backend need not serve every dtype the manifest allows; it says so clearly.
    TORCH_CHECK(call.inputs[0].scalar_type() != at::kBFloat16, "target 'example_cpu' has no bfloat16 kernel");
    return tileops::BuildKey{c10::multiply_integers(call.params[0].as_ints())};
  };
  b.build = [](const tileops::OpCall&, const tileops::BuildKey& key) -> std::shared_ptr<const tileops::Kernel> {
    return std::make_shared<RmsNormLoop>(key.words[0]);
  };
  b.describe = [](const tileops::BuildKey& key) { return "example rms_norm n=" + std::to_string(key.words[0]); };
  return b;
}

}  // namespace

TILEOPS_REGISTER_TARGET(example_cpu, reg) {
  reg.detector([](const c10::Device& d) {
    const char* claim = std::getenv("TILEOPS_EXAMPLE_CLAIM_CPU");
    return d.is_cpu() && claim != nullptr && claim[0] == '1';
  });
  reg.kernel("RMSNormFwdOp", rms_norm_builder());
}

#include "targets/nvrtc/norm_rms_norm_fwd.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cfloat>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::norm_rms_norm_fwd;





float eps_of(const OpCall& call, const RmsNormSlots& s) {
  // F.rms_norm: eps=None is torch.finfo(float32).eps for float16/bfloat16/float32 inputs.
  const auto eps = call.params[s.eps].as_optional_real();
  return eps ? static_cast<float>(*eps) : FLT_EPSILON;
}

const void* ptr_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

int alignment_vec(const OpCall& call, const RmsNormSlots& s, int elem) {
  const bool res = s.residual >= 0;
  return access_width({call.inputs[s.x].data_ptr(), call.outputs[s.y].data_ptr(), ptr_or_null(call.inputs[s.weight]),
                       res ? call.inputs[s.residual].data_ptr() : nullptr,
                       res ? call.outputs[s.residual_out].data_ptr() : nullptr},
                      elem);
}

class RmsNormKernel final : public Kernel {
 public:
  RmsNormKernel(LoadedKernel k, RmsNormPlan p, RmsNormSlots s) : k_(std::move(k)), p_(p), s_(s) {}
  void launch(const OpCall& call) const override {
    const void* x = call.inputs[s_.x].const_data_ptr();
    const void* w = p_.has_weight ? call.inputs[s_.weight].const_data_ptr() : nullptr;
    void* y = call.outputs[s_.y].mutable_data_ptr();
    long long rows = call.inputs[s_.x].numel() / p_.n;
    const long long grid = (rows + p_.rows - 1) / p_.rows;
    TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many rows (", rows, ") for one launch");
    if (p_.add_residual) {
      const void* r_in = call.inputs[s_.residual].const_data_ptr();
      void* r_out = call.outputs[s_.residual_out].mutable_data_ptr();  // the residual itself when in place
      void* args[] = {&x, &r_in, &r_out, &w, &y, &rows};
      nvrtc::launch(k_, static_cast<unsigned>(grid), static_cast<unsigned>(p_.tpr * p_.rows), 0, args);
    } else {
      void* args[] = {&x, &w, &y, &rows};
      nvrtc::launch(k_, static_cast<unsigned>(grid), static_cast<unsigned>(p_.tpr * p_.rows), 0, args);
    }
  }

 private:
  LoadedKernel k_;
  RmsNormPlan p_;
  RmsNormSlots s_;
};

}  // namespace

RmsNormPlan plan_rms_norm(c10::ScalarType dtype, int64_t n, bool has_weight, float eps, int max_vec,
                          bool add_residual) {
  RmsNormPlan p{};
  p.add_residual = add_residual;
  p.dtype = dtype;
  p.n = static_cast<int>(n);
  p.has_weight = has_weight;
  p.eps_bits = float_bits(eps);
  const int elem = static_cast<int>(c10::elementSize(dtype));
  p.vec = std::min(16 / elem, max_vec);
  while (p.vec > 1 && n % p.vec != 0) p.vec /= 2;
  const int64_t vecs = n / p.vec;
  // About 4 vectors per thread on up to 256 threads a row, then up to 8 (registers still hold the
  // row), then wider CTAs. Measured on the H200 (docs/PERF.md): 512-thread rows of 4 vectors ran
  // 4096x16384 bf16 at 0.69 of copy, 256 threads of 8 vectors at 0.97.
  // TILEOPS_RMS_VECS_PER_THREAD overrides the first target for tuning experiments (read once).
  static const int kTarget = [] {
    const char* env = std::getenv("TILEOPS_RMS_VECS_PER_THREAD");
    const int v = env ? std::atoi(env) : 0;
    return v >= 1 && v <= 16 ? v : 4;
  }();
  p.tpr = std::min<int>(256, next_pow2((vecs + kTarget - 1) / kTarget));
  if ((vecs + p.tpr - 1) / p.tpr > 8) p.tpr = std::min<int>(1024, next_pow2((vecs + 7) / 8));
  const int64_t per_thread = (vecs + p.tpr - 1) / p.tpr;
  const int regs_per_vec = std::max(1, p.vec * elem / 4);
  // 1024-thread CTAs may use 64 registers a thread: keep the row in half of them at most.
  p.cache = per_thread * regs_per_vec <= 32;
  // Groups wider than a warp reduce through shared memory and own their CTA.
  p.rows = p.tpr > 32 ? 1 : 256 / p.tpr;
  return p;
}

std::string rms_norm_name(const RmsNormPlan& p, const std::string& arch) {
  return std::string(p.add_residual ? "fused_add_rms_norm_fwd__" : "rms_norm_fwd__") + short_type_name(p.dtype) + "__n" + std::to_string(p.n) + "__v" +
         std::to_string(p.vec) + "_t" + std::to_string(p.tpr) + "_r" + std::to_string(p.rows) +
         (p.has_weight ? "_w" : "_nw") + (p.cache ? "_reg" : "_stream") + "__eps" + std::to_string(p.eps_bits) + "__" +
         arch;
}

jit::KernelSource rms_norm_source(const RmsNormPlan& p, const std::string& arch) {
  const std::string expr = std::string(p.add_residual ? "tileops::fused_add_rms_norm_fwd<" : "tileops::rms_norm_fwd<") +
                           kernel_type_name(p.dtype) + ", " + std::to_string(p.n) +
                           ", " + std::to_string(p.vec) + ", " + std::to_string(p.tpr) + ", " + std::to_string(p.rows) +
                           ", " + (p.has_weight ? "true" : "false") + ", " + (p.cache ? "true" : "false") + ", " +
                           std::to_string(p.eps_bits) + "u>";
  return make_source(rms_norm_name(p, arch), "norm/rms_norm_fwd.cuh", expr, arch);
}

KernelBuilder make_rms_norm_builder(RmsNormSlots slots) {
  KernelBuilder b;
  const bool add = slots.residual >= 0;
  // Build identity: (dtype, n, eps, weight or not, access width). Device facts enter through the
  // arch at build time; the runtime keys loaded kernels by device anyway.
  b.identity = [slots](const OpCall& call) {
    TORCH_CHECK(call.device.is_cuda(), "target 'nvrtc' serves CUDA tensors only, got ", call.device,
                "; use target='reference' (or the default) for this device");
    const at::Tensor& x = call.inputs[slots.x];
    const int64_t n = c10::multiply_integers(call.params[slots.normalized_shape].as_ints());
    const int elem = static_cast<int>(x.element_size());
    return BuildKey{static_cast<int64_t>(x.scalar_type()), n, static_cast<int64_t>(float_bits(eps_of(call, slots))),
                    call.inputs[slots.weight].defined() ? 1 : 0, alignment_vec(call, slots, elem)};
  };
  b.build = [slots, add](const OpCall& call, const BuildKey& key) -> std::shared_ptr<const Kernel> {
    const int device = call.device.index();
    const DeviceInfo& dev = device_info(device);
    float eps;
    const uint32_t bits = static_cast<uint32_t>(key.words[2]);
    std::memcpy(&eps, &bits, sizeof eps);
    const RmsNormPlan plan = plan_rms_norm(static_cast<c10::ScalarType>(key.words[0]), key.words[1], key.words[3] != 0,
                                           eps, static_cast<int>(key.words[4]), add);
    return std::make_shared<RmsNormKernel>(load(rms_norm_source(plan, dev.arch), device), plan, slots);
  };
  b.describe = [add](const BuildKey& key) {
    return std::string(add ? "fused_add_rms_norm_fwd(dtype=" : "rms_norm_fwd(dtype=") +
           short_type_name(static_cast<c10::ScalarType>(key.words[0])) + ", n=" + std::to_string(key.words[1]) +
           ", weight=" + (key.words[3] ? "yes" : "no") + ", vec=" + std::to_string(key.words[4]) + ")";
  };
  return b;
}

KernelBuilder rms_norm_fwd_builder() {
  return make_rms_norm_builder(RmsNormSlots{op::x, -1, op::weight, op::y, -1, op::normalized_shape, op::eps});
}

TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormFwdOp, rms_norm_fwd_builder);

}  // namespace tileops::nvrtc

// LayerNormFwdOp on the nvrtc target: src/kernels/norm/layer_norm_fwd.cuh, planned like RMSNorm
// (same row layout and register budget), or on sm_90+ layer_norm_fwd_staged.cuh for rows of 8 KB
// to 64 KB with 16-byte accesses (the row in shared memory).
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/norm_layer_norm_fwd.h"
#include "targets/nvrtc/norm_rms_norm_fwd.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::norm_layer_norm_fwd;


class LayerNormKernel final : public Kernel {
 public:
  LayerNormKernel(LoadedKernel k, RmsNormPlan p, StagedWalk walk) : k_(std::move(k)), p_(p), walk_(walk) {}
  void launch(const OpCall& call) const override {
    const void* x = call.inputs[op::x].const_data_ptr();
    const void* w = call.inputs[op::weight].defined() ? call.inputs[op::weight].const_data_ptr() : nullptr;
    const void* b = call.inputs[op::bias].defined() ? call.inputs[op::bias].const_data_ptr() : nullptr;
    void* y = call.outputs[op::y].mutable_data_ptr();
    long long rows = call.inputs[op::x].numel() / p_.n;
    const long long grid = p_.staged ? walk_.grid(rows) : (rows + p_.rows - 1) / p_.rows;
    TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many rows (", rows, ") for one launch");
    void* args[] = {&x, &w, &b, &y, &rows};
    nvrtc::launch(k_, static_cast<unsigned>(grid), static_cast<unsigned>(p_.tpr * p_.rows),
                  static_cast<unsigned>(walk_.smem_bytes(rows)), args);
  }

 private:
  LoadedKernel k_;
  RmsNormPlan p_;
  StagedWalk walk_;  // staged rows: persistent CTAs
};

int alignment_vec(const OpCall& call, int elem) {
  auto ptr = [](const at::Tensor& t) -> const void* { return t.defined() ? t.data_ptr() : nullptr; };
  return access_width({call.inputs[op::x].data_ptr(), call.outputs[op::y].data_ptr(), ptr(call.inputs[op::weight]),
                       ptr(call.inputs[op::bias])},
                      elem);
}


}  // namespace

jit::KernelSource layer_norm_source(const RmsNormPlan& p, bool has_bias, const std::string& arch) {
  const std::string name = rms_norm_name(p, arch).replace(0, std::string("rms_norm_fwd").size(), "layer_norm_fwd") +
                           (has_bias ? "_b" : "_nb");
  const std::string head = std::string("<") + kernel_type_name(p.dtype) + ", " + std::to_string(p.n) + ", " +
                           std::to_string(p.vec) + ", " + std::to_string(p.tpr) + ", ";
  const std::string wb = std::string(p.has_weight ? "true" : "false") + ", " + (has_bias ? "true" : "false");
  const std::string eps = std::to_string(p.eps_bits) + "u>";
  if (p.staged)
    return make_source(name + (p.one_pass ? "_1p" : "") + (p.cache ? "" : "_nca"), "norm/layer_norm_fwd_staged.cuh",
                       "tileops::layer_norm_fwd_staged" + head + wb + ", " + (p.one_pass ? "true, " : "false, ") +
                           (p.cache ? "true, " : "false, ") + eps,
                       arch);
  return make_source(name, "norm/layer_norm_fwd.cuh",
                     "tileops::layer_norm_fwd" + head + std::to_string(p.rows) + ", " + wb + ", " +
                         (p.cache ? "true" : "false") + ", " + eps,
                     arch);
}

int layer_norm_staged_per_thread(c10::ScalarType dtype, int64_t n) {
  return n * static_cast<int64_t>(c10::elementSize(dtype)) >= 16384 ? 4 : 8;
}

bool layer_norm_one_pass(c10::ScalarType dtype, int64_t n) {
  static const bool kKnob = env_int("TILEOPS_LN_ONE_PASS", 1, 0, 1) != 0;
  return kKnob && dtype == c10::kBFloat16 && n <= 16384;
}

bool layer_norm_cache_affine() {
  static const bool kKnob = env_int("TILEOPS_LN_CACHE_AFFINE", 0, 0, 1) != 0;
  return kKnob;
}

bool layer_norm_staged(c10::ScalarType dtype, int64_t n, int max_vec, int cc_major) {
  return staged_row_applies(dtype, n, row_access_width(dtype, n, max_vec), cc_major, kLayerNormStagedMinRowBytes);
}

namespace {

KernelBuilder layer_norm_builder() {
  KernelBuilder b;
  // Identity: (dtype, n, eps, weight, bias, access width) and, for a staged row (whose build needs
  // sm_90+), the compute capability.
  b.identity = [](const OpCall& call) {
    TORCH_CHECK(call.device.is_cuda(), "target 'nvrtc' serves CUDA tensors only, got ", call.device);
    const at::Tensor& x = call.inputs[op::x];
    const int64_t n = c10::multiply_integers(call.params[op::normalized_shape].as_ints());
    const int max_vec = alignment_vec(call, static_cast<int>(x.element_size()));
    const DeviceInfo& dev = device_info(call.device.index());
    const bool staged = layer_norm_staged(x.scalar_type(), n, max_vec, dev.cc_major);
    return BuildKey{static_cast<int64_t>(x.scalar_type()), n,
                    static_cast<int64_t>(float_bits(static_cast<float>(call.params[op::eps].as_real()))),
                    call.inputs[op::weight].defined() ? 1 : 0, call.inputs[op::bias].defined() ? 1 : 0, max_vec,
                    staged ? dev.cc_major * 10 + dev.cc_minor : 0};
  };
  b.build = [](const OpCall& call, const BuildKey& key) -> std::shared_ptr<const Kernel> {
    const DeviceInfo& dev = device_info(call.device.index());
    float eps;
    const uint32_t bits = static_cast<uint32_t>(key.words[2]);
    std::memcpy(&eps, &bits, sizeof eps);
    RmsNormPlan plan = plan_rms_norm(static_cast<c10::ScalarType>(key.words[0]), key.words[1], key.words[3] != 0, eps,
                                     static_cast<int>(key.words[5]));
    if (key.words[6] != 0) {
      plan_staged(plan, layer_norm_staged_per_thread(plan.dtype, plan.n));
      plan.one_pass = layer_norm_one_pass(plan.dtype, plan.n);
      plan.cache = layer_norm_cache_affine();  // staged rows: `cache` means weight/bias kept in registers
    }
    LoadedKernel k = load(layer_norm_source(plan, key.words[4] != 0, dev.arch), call.device.index());
    const StagedWalk walk = plan.staged ? plan_staged_walk(k, plan.tpr, rms_norm_smem_bytes(plan), dev) : StagedWalk{};
    return std::make_shared<LayerNormKernel>(std::move(k), plan, walk);
  };
  b.describe = [](const BuildKey& key) {
    return "layer_norm_fwd(n=" + std::to_string(key.words[1]) + ", weight=" + std::to_string(key.words[3]) +
           ", bias=" + std::to_string(key.words[4]) + ", vec=" + std::to_string(key.words[5]) +
           (key.words[6] ? ", staged" : "") + ")";
  };
  return b;
}
TILEOPS_BUILTIN_KERNEL(nvrtc, LayerNormFwdOp, layer_norm_builder);

}  // namespace
}  // namespace tileops::nvrtc

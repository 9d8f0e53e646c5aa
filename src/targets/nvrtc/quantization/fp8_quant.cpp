// FP8QuantFwdOp on the nvrtc target: problem, plan, launch and registration.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "targets/builtin.h"
#include "targets/nvrtc/quantization/fp8_quant.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::quantization_fp8_quant_fwd;

// The plan's thresholds. Not measured yet: a row of up to 32 accesses takes that many threads (the
// next power of two), one access each; a longer row takes a warp, at most kMaxPerThread accesses a
// thread kept in registers (8 x 16 bytes: 32 registers); past that the row is read twice.
struct Fp8QuantThresholds {
  int max_tpr = 32;
  int max_per_thread = 8;
};
constexpr Fp8QuantThresholds kFp8Quant{};

class Fp8QuantKernel final : public Kernel {
 public:
  Fp8QuantKernel(LoadedKernel k, Fp8QuantSpec s) : k_(std::move(k)), s_(std::move(s)) {}
  void launch(const OpCall& call) const override {
    const op::View v(call);
    const at::Tensor& x = v.input_tensor();
    const void* xp = x.const_data_ptr();
    void* sp = v.scale_tensor().mutable_data_ptr();
    void* qp = v.output_tensor().mutable_data_ptr();
    const long long n = x.size(-1);
    long long rows = x.numel() / n, vecs = n / s_.vec;
    const long long rows_per_cta = kFp8QuantCtaThreads / s_.tpr;
    const long long grid = (rows + rows_per_cta - 1) / rows_per_cta;
    // Within grid_x's 2^31 - 1: a CTA covers over 128 elements, so more CTAs would be over 2^38 elements.
    void* args[] = {&xp, &sp, &qp, &rows, &vecs};
    nvrtc::launch(k_, static_cast<unsigned>(grid), kFp8QuantCtaThreads, 0, args);
  }

 private:
  LoadedKernel k_;
  Fp8QuantSpec s_;
};

KernelBuilder fp8_quant_fwd_builder() { return spec_builder(Fp8QuantFamily{}); }

}  // namespace

Fp8QuantProblem Fp8QuantFamily::problem(const OpCall& call) const {
  const op::View v(call);
  const at::Tensor& x = v.input_tensor();
  const int64_t n = x.size(-1);
  // x's accesses are vec elements; q's are vec bytes: both pointers aligned to theirs.
  const int elem = static_cast<int>(c10::elementSize(x.scalar_type()));
  const int max_vec = std::min(access_width({x.const_data_ptr()}, elem),
                               access_width({v.output_tensor().const_data_ptr()}, 1));
  const int vec = row_access_width(x.scalar_type(), n, max_vec);
  return Fp8QuantProblem{x.scalar_type(), vec, n / vec};
}

Fp8QuantSpec Fp8QuantFamily::plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const {
  const int tpr = q.vecs >= kFp8Quant.max_tpr ? kFp8Quant.max_tpr : next_pow2(q.vecs);
  const int64_t per = (q.vecs + tpr - 1) / tpr;
  const int per_thread = per <= kFp8Quant.max_per_thread ? static_cast<int>(per) : 0;
  return Fp8QuantSpec{q.dtype, q.vec, tpr, per_thread, dev.arch};
}

std::shared_ptr<const Kernel> Fp8QuantFamily::make(const Spec& s, std::vector<LoadedKernel> k,
                                                   const DeviceInfo&) const {
  return std::make_shared<Fp8QuantKernel>(std::move(k[0]), s);
}

std::vector<jit::KernelSource> Fp8QuantSpec::sources() const {
  const std::string name = std::string("fp8_quant_fwd__") + short_type_name(dtype) + "__v" + std::to_string(vec) +
                           "_t" + std::to_string(tpr) + "_p" + std::to_string(per_thread) + "__" + arch;
  const std::string expr = std::string("tileops::fp8_quant_fwd<") + kernel_type_name(dtype) + ", " +
                           std::to_string(vec) + ", " + std::to_string(tpr) + ", " + std::to_string(per_thread) + ">";
  return {make_source(name, "quantization/fp8_quant_fwd.cuh", expr, arch)};
}

std::string Fp8QuantSpec::describe() const {
  return std::string("fp8_quant_fwd(dtype=") + short_type_name(dtype) + ", vec=" + std::to_string(vec) +
         ", tpr=" + std::to_string(tpr) + ", per_thread=" + std::to_string(per_thread) + ")";
}

TILEOPS_BUILTIN_KERNEL(nvrtc, FP8QuantFwdOp, fp8_quant_fwd_builder);

}  // namespace tileops::nvrtc

// GemmFp8FwdOp on the nvrtc target: block and mixed scales on its kernel (sm_89+), per-tensor ones
// declined to cuBLASLt.
#include "targets/nvrtc/gemm/fp8_gemm.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"
#include "targets/reference/gemm.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::gemm_fp8_fwd;

class Fp8GemmKernel final : public Kernel {
 public:
  Fp8GemmKernel(LoadedKernel k, Fp8GemmSpec s) : k_(std::move(k)), s_(std::move(s)) {}
  void launch(const OpCall& call) const override {
    const op::View v(call);
    const at::Tensor &a = v.a(), &b = v.b(), &d = v.d();
    const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
    if (m == 0 || n == 0) return;  // nothing to write
    TORCH_CHECK(m <= 0x7fffffffLL && n <= 0x7fffffffLL && k <= 0x7fffffffLL, call.op_name,
                ": M, N and K must fit 32 bits for the nvrtc kernel");
    const int64_t n_tiles = (n + kFp8GemmCols - 1) / kFp8GemmCols, m_tiles = (m + kFp8GemmRows - 1) / kFp8GemmRows;
    TORCH_CHECK(n_tiles * m_tiles <= 0x7fffffffLL, call.op_name, ": too many tiles for one launch");
    const at::Tensor &sa = v.scale_a(), &sb = v.scale_b();
    const bool sa_tensor = sa.numel() == 1, sb_tensor = sb.numel() == 1;
    const void *ap = a.const_data_ptr(), *bp = b.const_data_ptr(), *sap = sa.const_data_ptr(),
               *sbp = sb.const_data_ptr(), *biasp = v.bias() ? v.bias()->const_data_ptr() : nullptr;
    void* dp = d.mutable_data_ptr();
    int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
    int sa_row = sa_tensor ? 0 : static_cast<int>(sa.size(1)), sa_block = sa_tensor ? 0 : 1;
    int sb_row = sb_tensor ? 0 : static_cast<int>(sb.size(1)), sb_block = sb_tensor ? 0 : 1;
    int nt = static_cast<int>(n_tiles);
    void* args[] = {&ap, &bp, &sap, &sbp, &biasp, &dp, &M, &N, &K, &sa_row, &sa_block, &sb_row, &sb_block, &nt};
    nvrtc::launch(k_, static_cast<unsigned>(n_tiles * m_tiles), kFp8GemmThreads,
                  static_cast<unsigned>(fp8_gemm_smem_bytes(s_.stages)), args);
  }

 private:
  LoadedKernel k_;
  Fp8GemmSpec s_;
};

struct Fp8GemmFamily {
  using Problem = Fp8GemmProblem;
  using Spec = Fp8GemmSpec;
  Problem problem(const OpCall& call) const {
    const op::View v(call);
    const at::Tensor &a = v.a(), &b = v.b();
    const bool aligned = access_width({a.const_data_ptr(), b.const_data_ptr()}, 1) == 16;
    return {v.d().scalar_type(), v.bias() ? v.bias()->scalar_type() : c10::ScalarType::Undefined,
            aligned && a.size(1) % 16 == 0, v.scale_a().numel() == 1 && v.scale_b().numel() == 1};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const { return fp8_gemm_plan(q, dev); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    if (s.declined) return declined_kernel();
    if (!s.kernel()) return function_kernel(&reference::gemm_fp8_fwd_aten);
    allow_dynamic_smem(k[0], fp8_gemm_smem_bytes(s.stages), dev);
    return std::make_shared<Fp8GemmKernel>(std::move(k[0]), s);
  }
};

KernelBuilder fp8_gemm_builder() { return spec_builder(Fp8GemmFamily{}); }

}  // namespace

int fp8_gemm_smem_bytes(int stages) { return stages * (kFp8GemmRows + kFp8GemmCols) * 128; }

Fp8GemmSpec fp8_gemm_plan(const Fp8GemmProblem& q, const DeviceFacts& dev) {
  const c10::ScalarType bias = q.bias == c10::ScalarType::Undefined ? q.out : q.bias;
  if (q.per_tensor) return {q.out, bias, 0, "", true};
  if (!q.shape_ok || dev.sm() < 89 || fp8_gemm_smem_bytes(kFp8GemmStages) > dev.max_smem_optin)
    return {q.out, bias, 0, ""};  // the e4m3 MMA needs sm_89
  return {q.out, bias, kFp8GemmStages, dev.arch};
}

std::vector<jit::KernelSource> Fp8GemmSpec::sources() const {
  if (!kernel()) return {};
  const std::string name = std::string("fp8_gemm_fwd__") + short_type_name(out) + "_b" + short_type_name(bias) +
                           "__s" + std::to_string(stages) + "__" + arch;
  const std::string expr = std::string("tileops::fp8_gemm_fwd<") + kernel_type_name(out) + ", " +
                           kernel_type_name(bias) + ", " + std::to_string(stages) + ">";
  return {make_source(name, "gemm/fp8_gemm.cuh", expr, arch)};
}

std::string Fp8GemmSpec::describe() const {
  if (declined) return "gemm_fp8_fwd (per-tensor scales: declined to the backstops)";
  if (!kernel()) return "gemm_fp8_fwd (ATen)";
  return std::string("fp8_gemm_fwd(out=") + short_type_name(out) + ", bias=" + short_type_name(bias) +
         ", stages=" + std::to_string(stages) + ")";
}

TILEOPS_BUILTIN_KERNEL(nvrtc, GemmFp8FwdOp, fp8_gemm_builder);

}  // namespace tileops::nvrtc

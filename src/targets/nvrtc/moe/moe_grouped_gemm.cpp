// MoeGroupedGemmNopadFwdOp and MoeGateUpFwdOp on the nvrtc target (pending: cuBLASLt serves CUDA by
// default): decode sizes and captured calls, declining the rest to cuBLASLt.
#include "targets/nvrtc/moe/moe_grouped_gemm.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <memory>

#include "boundary/runtime.h"
#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace grouped = tileops::ops::moe_grouped_gemm_nopad_fwd;
namespace gate_up = tileops::ops::moe_gate_up_fwd;

// Both ops' views name their tensors alike: a, b, true_sizes, true_offsets, c.
template <class View>
class MoeGemmKernel final : public Kernel {
 public:
  MoeGemmKernel(LoadedKernel k, MoeGemmSpec s) : k_(std::move(k)), s_(std::move(s)) {}
  void launch(const OpCall& call) const override {
    const View v(call);
    const at::Tensor &a = v.a(), &b = v.b(), &c = v.c();
    const int64_t numel = a.size(0), experts = b.size(0), n = c.size(1), k = a.size(1);
    if (numel == 0 || n == 0) return;  // nothing to write
    TORCH_CHECK(numel <= 0x7fffffffLL && b.size(1) <= 0x7fffffffLL && k <= 0x7fffffffLL,
                call.op_name, ": numel, n and k must fit 32 bits for the nvrtc kernel");
    const int64_t n_tiles = (n + s_.out_cols() - 1) / s_.out_cols();
    const int64_t slots = (numel + kMoeGemmRows - 1) / kMoeGemmRows + experts;  // a bound on the row tiles
    TORCH_CHECK(slots * (n_tiles + 1) <= 0x7fffffffLL, call.op_name, ": too many tiles for one launch");
    const void *ap = a.const_data_ptr(), *bp = b.const_data_ptr(), *sp = v.true_sizes().const_data_ptr(),
               *op_ = v.true_offsets().const_data_ptr();
    void* cp = c.mutable_data_ptr();
    int M = static_cast<int>(numel), N = static_cast<int>(n), K = static_cast<int>(k), E = static_cast<int>(experts),
        nt = static_cast<int>(n_tiles);
    void* args[] = {&ap, &bp, &sp, &op_, &cp, &M, &N, &K, &E, &nt};
    nvrtc::launch(k_, static_cast<unsigned>(slots * (n_tiles + 1)), kMoeGemmThreads,
                  static_cast<unsigned>(moe_gemm_smem_bytes(s_.stages)), args);
  }

 private:
  LoadedKernel k_;
  MoeGemmSpec s_;
};

int activation_of(const grouped::View&) { return kMoeNoAct; }
int activation_of(const gate_up::View& v) { return v.activation() == "silu_and_mul" ? kActSilu : kActGelu; }

template <class View>
struct MoeGemmFamily {
  using Problem = MoeGemmProblem;
  using Spec = MoeGemmSpec;
  Problem problem(const OpCall& call) const {
    const View v(call);
    const at::Tensor &a = v.a(), &b = v.b();
    const bool aligned = access_width({a.const_data_ptr(), b.const_data_ptr()}, 1) == 16;
    const int64_t experts = std::max<int64_t>(b.size(0), 1);
    int64_t per_expert = 1;
    while (per_expert * experts < a.size(0)) per_expert *= 2;
    return {a.scalar_type(), moe_gemm_shape_ok(a.size(1), b.size(0), aligned), activation_of(v), per_expert,
            runtime::stream_is_capturing(call.device)};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const { return moe_gemm_plan(q, dev, t); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    if (!s.kernel()) return declined_kernel();
    allow_dynamic_smem(k[0], moe_gemm_smem_bytes(s.stages), dev);
    return std::make_shared<MoeGemmKernel<View>>(std::move(k[0]), s);
  }
};

KernelBuilder moe_gemm_builder() { return spec_builder(MoeGemmFamily<grouped::View>{}); }
KernelBuilder moe_gate_up_builder() { return spec_builder(MoeGemmFamily<gate_up::View>{}); }

}  // namespace

int moe_gemm_smem_bytes(int stages) { return stages * (kMoeGemmRows + kMoeGemmCols) * 128; }

bool moe_gemm_shape_ok(int64_t k, int64_t experts, bool aligned) {
  return k % 8 == 0 && aligned && experts <= kMoeGemmMaxExperts;
}

MoeGemmSpec moe_gemm_plan(const MoeGemmProblem& q, const DeviceFacts& dev, const Tuning& tuning) {
  const int64_t bound = tuning.moe_max_rows_per_expert ? tuning.moe_max_rows_per_expert : kMoeGemmMaxRowsPerExpert;
  const bool served = q.capturing || q.per_expert <= bound;
  // the m16n8k16 MMA and cp.async need sm_80
  if (!q.shape_ok || !served || dev.sm() < 80 || moe_gemm_smem_bytes(kMoeGemmStages) > dev.max_smem_optin)
    return {q.dtype, 0, "", q.act};
  return {q.dtype, kMoeGemmStages, dev.arch, q.act};
}

std::vector<jit::KernelSource> MoeGemmSpec::sources() const {
  if (!kernel()) return {};
  const std::string act_name = act == kMoeNoAct ? "" : act == kActSilu ? "_silu_and_mul" : "_gelu_and_mul";
  const std::string name = std::string("moe_grouped_gemm_fwd") + act_name + "__" + short_type_name(dtype) + "__s" +
                           std::to_string(stages) + "__" + arch;
  const std::string expr = std::string("tileops::moe_grouped_gemm_fwd<") + kernel_type_name(dtype) + ", " +
                           std::to_string(stages) + ", " + std::to_string(act) + ">";
  return {make_source(name, "moe/moe_grouped_gemm.cuh", expr, arch)};
}

std::string MoeGemmSpec::describe() const {
  const std::string gated = act == kMoeNoAct ? "" : act == kActSilu ? ", silu_and_mul" : ", gelu_and_mul";
  if (!kernel()) return "moe_grouped_gemm_fwd" + gated + " (declined to the backstops)";
  return std::string("moe_grouped_gemm_fwd(dtype=") + short_type_name(dtype) + gated +
         ", stages=" + std::to_string(stages) + ", runs read on the device)";
}

TILEOPS_PENDING_KERNEL(nvrtc, MoeGroupedGemmNopadFwdOp, moe_gemm_builder);
TILEOPS_PENDING_KERNEL(nvrtc, MoeGateUpFwdOp, moe_gate_up_builder);

}  // namespace tileops::nvrtc

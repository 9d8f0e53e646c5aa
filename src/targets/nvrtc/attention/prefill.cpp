// MultiHeadAttentionFwdOp and GroupedQueryAttentionFwdOp on the nvrtc target (pending: the reference
// serves CUDA by default).
#include "targets/nvrtc/attention/prefill.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace mha = tileops::ops::attention_multi_head_attention_fwd;
namespace gqa = tileops::ops::attention_grouped_query_attention_fwd;

// Both ops' views name their tensors alike: q [B, S, H, D], k and v [B, S, H_kv, D], o as q.
template <class View>
class PrefillKernel final : public Kernel {
 public:
  PrefillKernel(LoadedKernel k, PrefillSpec s) : k_(std::move(k)), s_(std::move(s)) {}
  void launch(const OpCall& call) const override {
    const View v(call);
    const at::Tensor &q = v.q(), &k = v.k();
    const int64_t batch = q.size(0), seq = q.size(1), heads = q.size(2), kv_heads = k.size(2);
    if (batch == 0 || seq == 0 || heads == 0) return;  // nothing to write
    const int64_t m_tiles = (seq + kPrefillRows - 1) / kPrefillRows;
    TORCH_CHECK(batch * heads * m_tiles <= 0x7fffffffLL && batch * seq * heads * s_.dim <= (1LL << 62),
                call.op_name, ": too many query tiles for one launch");
    TORCH_CHECK(seq <= 0x7fffffffLL, call.op_name, ": the sequence must fit 32 bits for the nvrtc kernel");
    const void *qp = q.const_data_ptr(), *kp = k.const_data_ptr(), *vp = v.v().const_data_ptr();
    void* op = v.o().mutable_data_ptr();
    int S = static_cast<int>(seq), H = static_cast<int>(heads), Hkv = static_cast<int>(kv_heads),
        bh = static_cast<int>(batch * heads), mt = static_cast<int>(m_tiles);
    float scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(s_.dim)));
    void* args[] = {&qp, &kp, &vp, &op, &S, &H, &Hkv, &bh, &mt, &scale_log2};
    nvrtc::launch(k_, static_cast<unsigned>(bh * m_tiles), kPrefillThreads,
                  static_cast<unsigned>(prefill_smem_bytes(s_.dim, s_.stages)), args);
  }

 private:
  LoadedKernel k_;
  PrefillSpec s_;
};

template <class View>
struct PrefillFamily {
  using Problem = PrefillProblem;
  using Spec = PrefillSpec;
  Problem problem(const OpCall& call) const {
    const View v(call);
    const at::Tensor& q = v.q();
    const bool aligned = access_width({q.const_data_ptr(), v.k().const_data_ptr(), v.v().const_data_ptr(),
                                       v.o().const_data_ptr()}, 1) == 16;
    return {q.scalar_type(), q.size(3), v.is_causal(), aligned};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const { return prefill_plan(q, dev); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    if (!s.kernel()) return declined_kernel();
    allow_dynamic_smem(k[0], prefill_smem_bytes(s.dim, s.stages), dev);
    return std::make_shared<PrefillKernel<View>>(std::move(k[0]), s);
  }
};

KernelBuilder mha_prefill_builder() { return spec_builder(PrefillFamily<mha::View>{}); }
KernelBuilder gqa_prefill_builder() { return spec_builder(PrefillFamily<gqa::View>{}); }

}  // namespace

int prefill_smem_bytes(int dim, int stages) { return (kPrefillRows + stages * 2 * kPrefillTile) * dim * 2; }

PrefillSpec prefill_plan(const PrefillProblem& q, const DeviceFacts& dev) {
  const bool half = q.dtype == c10::kHalf || q.dtype == c10::kBFloat16;
  const int stages = q.dim == 64 ? 3 : 2;  // two CTAs an SM at D = 128 on sm_80's 164 KB too
  // the m16n8k16 MMA and cp.async need sm_80
  if (!half || !q.aligned || (q.dim != 64 && q.dim != 128) || dev.sm() < 80 ||
      prefill_smem_bytes(static_cast<int>(q.dim), stages) > dev.max_smem_optin)
    return {q.dtype, 0, 0, q.causal, ""};
  return {q.dtype, static_cast<int>(q.dim), stages, q.causal, dev.arch};
}

std::vector<jit::KernelSource> PrefillSpec::sources() const {
  if (!kernel()) return {};
  const std::string name = std::string("attention_prefill_fwd__") + short_type_name(dtype) + "__d" +
                           std::to_string(dim) + "__s" + std::to_string(stages) + (causal ? "__causal" : "") + "__" +
                           arch;
  const std::string expr = std::string("tileops::attention_prefill_fwd<") + kernel_type_name(dtype) + ", " +
                           std::to_string(dim) + ", " + std::to_string(stages) + ", " + (causal ? "true" : "false") +
                           ">";
  return {make_source(name, "attention/prefill.cuh", expr, arch)};
}

std::string PrefillSpec::describe() const {
  if (!kernel()) return "attention_prefill_fwd (declined to the backstops)";
  return std::string("attention_prefill_fwd(dtype=") + short_type_name(dtype) + ", D=" + std::to_string(dim) +
         ", stages=" + std::to_string(stages) + (causal ? ", causal" : "") + ")";
}

TILEOPS_PENDING_KERNEL(nvrtc, MultiHeadAttentionFwdOp, mha_prefill_builder);
TILEOPS_PENDING_KERNEL(nvrtc, GroupedQueryAttentionFwdOp, gqa_prefill_builder);

}  // namespace tileops::nvrtc

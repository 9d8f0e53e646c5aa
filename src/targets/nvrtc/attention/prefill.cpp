// Attention forward over whole sequences on the nvrtc target (pending: the reference serves CUDA by
// default): each op's tensors and params as one layout, the plan, the launch and the registrations.
#include "targets/nvrtc/attention/prefill.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace mha = tileops::ops::attention_multi_head_attention_fwd;
namespace gqa = tileops::ops::attention_grouped_query_attention_fwd;
namespace gqa_window = tileops::ops::attention_grouped_query_attention_sliding_window_fwd;
namespace gqa_window_varlen = tileops::ops::attention_grouped_query_attention_sliding_window_varlen_fwd;
namespace gqa_prefill = tileops::ops::attention_grouped_query_attention_prefill_fwd;
namespace gqa_paged = tileops::ops::attention_grouped_query_attention_prefill_paged_with_kv_cache_fwd;

// One call as the kernel reads it: fixed-length requests ([B, S, heads, D]; rows_q and rows_kv a
// request) or packed ones (cu offsets into [total, heads, D]; rows_q and rows_kv the totals); a paged
// call's k and v are its new rows, the cache in k_pages and v_pages.
struct PrefillLayout {
  const at::Tensor *q, *k, *v, *o;
  const at::Tensor *cu_q = nullptr, *cu_kv = nullptr;
  int64_t batch, rows_q, rows_kv, max_q, heads, kv_heads, dim;
  bool causal;
  int64_t left = -1, right = -1;
  std::optional<double> scale, softcap;
  bool plain = true;  // no FP8 scales, o in q's dtype: what the kernel takes
  const at::Tensor *k_pages = nullptr, *v_pages = nullptr, *cache_seqlens = nullptr, *block_table = nullptr;
  const at::Tensor *k_scale = nullptr, *v_scale = nullptr;
  int64_t pages = 0, page_size = 1, pool_pages = 0;
  int paged = kUnpaged;
  bool rope = false;
  int64_t rot = 0;
  double rope_base = 0;
};

PrefillLayout paged_layout(const gqa_paged::View& v) {
  const at::Tensor& q = v.q();
  PrefillLayout L{&q, &v.k_new(), &v.v_new(), &v.o(), &v.cu_seqlens_q()};
  L.batch = v.cu_seqlens_q().size(0) - 1, L.rows_q = L.rows_kv = q.size(0), L.max_q = v.max_seqlen_q();
  L.heads = q.size(1), L.kv_heads = v.k_new().size(1), L.dim = q.size(2), L.causal = v.is_causal();
  L.scale = v.sm_scale(), L.softcap = v.softcap();
  const bool fp8 = v.k_pages().scalar_type() == c10::ScalarType::Float8_e4m3fn;
  L.k_scale = v.k_scale(), L.v_scale = v.v_scale();
  L.paged = fp8 ? kPagedFp8 : (L.k_scale || L.v_scale) ? kPagedScaled : kPagedDirect;
  L.plain = fp8 || v.k_pages().scalar_type() == q.scalar_type();
  L.rope = v.fuse_rope(), L.rot = v.rotary_dim().value_or(L.dim), L.rope_base = v.rope_base();
  L.k_pages = &v.k_pages(), L.v_pages = &v.v_pages(), L.cache_seqlens = &v.cache_seqlens();
  L.block_table = &v.block_table(), L.pages = v.block_table().size(1), L.page_size = v.page_size();
  L.pool_pages = v.k_pages().size(0) / v.page_size();
  return L;
}

template <class View>
PrefillLayout fixed_layout(const View& v) {
  const at::Tensor& q = v.q();
  PrefillLayout L{&q, &v.k(), &v.v(), &v.o()};
  L.batch = q.size(0), L.rows_q = L.max_q = q.size(1), L.rows_kv = v.k().size(1);
  L.heads = q.size(2), L.kv_heads = v.k().size(2), L.dim = q.size(3), L.causal = v.is_causal();
  return L;
}

template <class View>
PrefillLayout packed_layout(const View& v, const at::Tensor& cu_kv) {
  const at::Tensor& q = v.q();
  PrefillLayout L{&q, &v.k(), &v.v(), &v.o(), &v.cu_seqlens_q(), &cu_kv};
  L.batch = v.cu_seqlens_q().size(0) - 1, L.rows_q = q.size(0), L.rows_kv = v.k().size(0);
  L.max_q = v.max_seqlen_q(), L.heads = q.size(1), L.kv_heads = v.k().size(1), L.dim = q.size(2);
  L.causal = v.is_causal(), L.left = v.window_size_left(), L.right = v.window_size_right();
  return L;
}

template <class View>
PrefillLayout layout(const OpCall& call) {
  const View v(call);
  if constexpr (std::is_same_v<View, mha::View> || std::is_same_v<View, gqa::View>) {
    return fixed_layout(v);
  } else if constexpr (std::is_same_v<View, gqa_window::View>) {
    PrefillLayout L = fixed_layout(v);
    L.left = v.window_size_left(), L.right = v.window_size_right();
    return L;
  } else if constexpr (std::is_same_v<View, gqa_window_varlen::View>) {
    return packed_layout(v, v.cu_seqlens_k());
  } else if constexpr (std::is_same_v<View, gqa_paged::View>) {
    return paged_layout(v);
  } else {
    PrefillLayout L = packed_layout(v, v.cu_seqlens_kv());
    L.scale = v.sm_scale(), L.softcap = v.softcap();
    L.plain = !v.q_scale() && !v.k_scale() && !v.v_scale() && v.o().scalar_type() == v.q().scalar_type();
    return L;
  }
}

class PrefillKernel final : public Kernel {
 public:
  PrefillKernel(std::vector<LoadedKernel> k, PrefillSpec s, PrefillLayout (*read)(const OpCall&))
      : k_(std::move(k)), s_(std::move(s)), read_(read) {}
  void launch(const OpCall& call) const override {
    const PrefillLayout L = read_(call);
    if (L.batch <= 0 || L.heads == 0 || L.o->numel() == 0) return;  // nothing to write
    // At least one query tile a request: its CTA walks a request longer than max_seqlen_q says.
    const int64_t m_tiles = std::max<int64_t>(1, (L.max_q + kPrefillRows - 1) / kPrefillRows);
    TORCH_CHECK(L.batch * L.heads * m_tiles <= 0x7fffffffLL, call.op_name, ": too many query tiles for one launch");
    TORCH_CHECK(std::max(L.rows_q, L.rows_kv) + L.pages * L.page_size <= 0x7fffffffLL, call.op_name,
                ": the sequences must fit 32 bits for the nvrtc kernel");
    const void *qp = L.q->const_data_ptr(), *kp = L.k->const_data_ptr(), *vp = L.v->const_data_ptr();
    const void* cq = L.cu_q ? L.cu_q->const_data_ptr() : nullptr;
    const void* ck = L.cu_kv ? L.cu_kv->const_data_ptr() : nullptr;
    void* op = L.o->mutable_data_ptr();
    int rows_q = static_cast<int>(L.rows_q), rows_kv = static_cast<int>(L.rows_kv), H = static_cast<int>(L.heads),
        Hkv = static_cast<int>(L.kv_heads), bh = static_cast<int>(L.batch * L.heads), mt = static_cast<int>(m_tiles),
        causal = L.causal ? 1 : 0, left = static_cast<int>(std::max<int64_t>(std::min<int64_t>(L.left, 1 << 30), -1)),
        right = static_cast<int>(std::max<int64_t>(std::min<int64_t>(L.right, 1 << 30), -1));
    float scale = static_cast<float>(L.scale.value_or(1.0 / std::sqrt(static_cast<double>(L.dim))));
    float softcap = static_cast<float>(L.softcap.value_or(0.0));
    const bool paged = L.k_pages != nullptr;
    void* kpp = paged ? L.k_pages->mutable_data_ptr() : nullptr;
    void* vpp = paged ? L.v_pages->mutable_data_ptr() : nullptr;
    const void* seqlens = paged ? L.cache_seqlens->const_data_ptr() : nullptr;
    const void* table = paged ? L.block_table->const_data_ptr() : nullptr;
    const void* ksp = L.k_scale ? L.k_scale->const_data_ptr() : nullptr;
    const void* vsp = L.v_scale ? L.v_scale->const_data_ptr() : nullptr;
    int pages = static_cast<int>(L.pages), page_size = static_cast<int>(L.page_size),
        pool_pages = static_cast<int>(std::min<int64_t>(L.pool_pages, 0x7fffffff)), batch = static_cast<int>(L.batch);
    at::Tensor q_rot, k_rot;  // the rotated q and new keys the attention and the append read
    if (s_.rope && rows_q > 0) {
      q_rot = at::empty_like(*L.q), k_rot = at::empty_like(*L.k);
      void *qr = q_rot.mutable_data_ptr(), *kr = k_rot.mutable_data_ptr();
      int rot = static_cast<int>(L.rot);
      float base = static_cast<float>(L.rope_base);
      void* rope[] = {&qp, &kp, &qr, &kr, &cq, &seqlens, &batch, &rows_q, &H, &Hkv, &rot, &base};
      nvrtc::launch(k_[2], static_cast<unsigned>(rows_q), kPrefillThreads, 0, rope);
      qp = qr, kp = kr;
    }
    void* args[] = {&qp,  &kp,    &vp,       &op,      &cq,    &ck,   &rows_q, &rows_kv, &H,
                    &Hkv, &bh,    &mt,       &scale,   &softcap, &causal, &left, &right, &kpp,
                    &vpp, &seqlens, &table, &pages, &page_size, &pool_pages, &ksp, &vsp};
    nvrtc::launch(k_[0], static_cast<unsigned>(bh * m_tiles), kPrefillThreads,
                  static_cast<unsigned>(prefill_smem_bytes(s_.dim, s_.stages)), args);
    if (!paged || rows_q == 0) return;
    // The new rows into the cache once the attention has read it as it was (same stream).
    void* append[] = {&kp, &vp, &kpp, &vpp, &cq, &seqlens, &table, &batch, &rows_q, &Hkv, &pages, &page_size,
                      &pool_pages, &ksp, &vsp};
    nvrtc::launch(k_[1], static_cast<unsigned>(rows_q), kPrefillThreads, 0, append);
  }

 private:
  std::vector<LoadedKernel> k_;
  PrefillSpec s_;
  PrefillLayout (*read_)(const OpCall&);
};

template <class View>
struct PrefillFamily {
  using Problem = PrefillProblem;
  using Spec = PrefillSpec;
  Problem problem(const OpCall& call) const {
    const PrefillLayout L = layout<View>(call);
    const bool aligned = access_width({L.q->const_data_ptr(), L.k->const_data_ptr(), L.v->const_data_ptr(),
                                       L.o->const_data_ptr()}, 1) == 16;
    const bool paged = L.k_pages != nullptr;
    const bool pool_aligned = !paged || access_width({L.k_pages->const_data_ptr(), L.v_pages->const_data_ptr()}, 1) == 16;
    return {L.q->scalar_type(), L.dim, L.cu_q != nullptr, aligned && pool_aligned && L.plain, L.paged, L.rope};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const { return prefill_plan(q, dev); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    if (!s.kernel()) return declined_kernel();
    allow_dynamic_smem(k[0], prefill_smem_bytes(s.dim, s.stages), dev);
    return std::make_shared<PrefillKernel>(std::move(k), s, &layout<View>);
  }
};

template <class View>
KernelBuilder prefill_builder() {
  return spec_builder(PrefillFamily<View>{});
}
KernelBuilder mha_prefill_builder() { return prefill_builder<mha::View>(); }
KernelBuilder gqa_prefill_builder() { return prefill_builder<gqa::View>(); }
KernelBuilder gqa_window_prefill_builder() { return prefill_builder<gqa_window::View>(); }
KernelBuilder gqa_window_varlen_prefill_builder() { return prefill_builder<gqa_window_varlen::View>(); }
KernelBuilder gqa_packed_prefill_builder() { return prefill_builder<gqa_prefill::View>(); }
KernelBuilder gqa_paged_prefill_builder() { return prefill_builder<gqa_paged::View>(); }

const char* const kPagedSuffix[] = {"", "__paged", "__paged_scaled", "__paged_fp8"};

}  // namespace

int prefill_smem_bytes(int dim, int stages) { return (kPrefillRows + stages * 2 * kPrefillTile) * dim * 2; }

PrefillSpec prefill_plan(const PrefillProblem& q, const DeviceFacts& dev) {
  const bool half = q.dtype == c10::kHalf || q.dtype == c10::kBFloat16;
  const int stages = q.dim == 64 ? 3 : 2;  // two CTAs an SM at D = 128 on sm_80's 164 KB too
  // the m16n8k16 MMA and cp.async need sm_80
  if (!half || !q.ok || (q.dim != 64 && q.dim != 128) || dev.sm() < 80 ||
      prefill_smem_bytes(static_cast<int>(q.dim), stages) > dev.max_smem_optin)
    return {q.dtype, 0, 0, q.varlen, "", q.paged, q.rope};
  return {q.dtype, static_cast<int>(q.dim), stages, q.varlen, dev.arch, q.paged, q.rope};
}

std::vector<jit::KernelSource> PrefillSpec::sources() const {
  if (!kernel()) return {};
  const std::string name = std::string("attention_prefill_fwd__") + short_type_name(dtype) + "__d" +
                           std::to_string(dim) + "__s" + std::to_string(stages) + (varlen ? "__varlen" : "") +
                           kPagedSuffix[paged] + "__" + arch;
  const std::string expr = std::string("tileops::attention_prefill_fwd<") + kernel_type_name(dtype) + ", " +
                           std::to_string(dim) + ", " + std::to_string(stages) + ", " + (varlen ? "true" : "false") +
                           ", " + std::to_string(paged) + ">";
  if (paged == kUnpaged) return {make_source(name, "attention/prefill.cuh", expr, arch)};
  const std::string tail = std::string(short_type_name(dtype)) + "__d" + std::to_string(dim);
  const std::string targs = std::string("<") + kernel_type_name(dtype) + ", " + std::to_string(dim);
  std::vector<jit::KernelSource> out{
      make_source(name, "attention/prefill.cuh", expr, arch),
      make_source("attention_paged_append__" + tail + kPagedSuffix[paged] + "__" + arch, "attention/prefill.cuh",
                  "tileops::attention_paged_append" + targs + ", " + std::to_string(paged) + ">", arch)};
  if (rope)
    out.push_back(make_source("attention_paged_rope__" + tail + "__" + arch, "attention/prefill.cuh",
                              "tileops::attention_paged_rope" + targs + ">", arch));
  return out;
}

std::string PrefillSpec::describe() const {
  if (!kernel()) return "attention_prefill_fwd (declined to the backstops)";
  return std::string("attention_prefill_fwd(dtype=") + short_type_name(dtype) + ", D=" + std::to_string(dim) +
         ", stages=" + std::to_string(stages) + (varlen ? ", packed requests" : "") +
         (paged != kUnpaged ? std::string(", paged cache") + kPagedSuffix[paged] + ", then attention_paged_append" : "") +
         (rope ? ", after attention_paged_rope" : "") + ")";
}

TILEOPS_PENDING_KERNEL(nvrtc, MultiHeadAttentionFwdOp, mha_prefill_builder);
TILEOPS_PENDING_KERNEL(nvrtc, GroupedQueryAttentionFwdOp, gqa_prefill_builder);
TILEOPS_PENDING_KERNEL(nvrtc, GroupedQueryAttentionSlidingWindowFwdOp, gqa_window_prefill_builder);
TILEOPS_PENDING_KERNEL(nvrtc, GroupedQueryAttentionSlidingWindowVarlenFwdOp, gqa_window_varlen_prefill_builder);
TILEOPS_PENDING_KERNEL(nvrtc, GroupedQueryAttentionPrefillFwdOp, gqa_packed_prefill_builder);
TILEOPS_PENDING_KERNEL(nvrtc, GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp, gqa_paged_prefill_builder);

}  // namespace tileops::nvrtc

// Decode attention on the nvrtc target: each op's tensors as one layout, the plan, the launches
// (decode_mma_fwd or decode_fwd, plus decode_merge when the cache is split) and the registrations.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>

#include "targets/builtin.h"
#include "targets/nvrtc/attention/decode.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace gqa = tileops::ops::attention_grouped_query_attention_decode_with_kv_cache_fwd;
namespace gqa_paged = tileops::ops::attention_grouped_query_attention_decode_paged_with_kv_cache_fwd;
namespace mha = tileops::ops::attention_multi_head_attention_decode_with_kv_cache_fwd;

// kDecodeWarps and kMmaWarps of the kernel headers; kMmaRows and kMmaTile of decode_mma.cuh.
constexpr int kDecodeCtaThreads = 128;
constexpr int kMmaWarps = 4, kMmaRows = 16, kMmaTile = 16;

// The plan's limits: decode_fwd takes at most 8 query rows a CTA and 64 float32 values a lane for
// each of the queries and the accumulators, and counts on two CTAs an SM (decode_mma_fwd: as many
// as its shared memory allows, at most 4); a split covers at least 128 tokens (two rounds of
// decode_mma_fwd's warps' tiles).
struct DecodeLimits {
  int max_rows = 8;
  int max_lane_floats = 64;
  int min_split_tokens = 128;
  int ctas_per_sm = 2;
  int max_mma_ctas_per_sm = 4;
  int max_splits = 128;
};
constexpr DecodeLimits kDecode{};

// One call's tensors, strides (elements) and scalars, whichever op it came from: query row g of KV
// head h of request b is at q + b * q_sb + h * q_sh + g * q_sg (o alike), token row r of KV head h
// at k + b * kv_sb + r * kv_st + h * kv_sh (v alike).
struct DecodeLayout {
  const at::Tensor *q, *k, *v, *o;
  const int* lengths = nullptr;
  const int* table = nullptr;
  int64_t q_sb, q_sh, q_sg, kv_sb, kv_st, kv_sh;
  int64_t batch, kv_heads, group, dim, n_kv;
  int64_t page_size = 1, pages = 0, pool_rows = 0;
  double scale, softcap;
};

double scale_or_default(std::optional<double> s, int64_t dim) {
  return s.value_or(dim > 0 ? 1.0 / std::sqrt(static_cast<double>(dim)) : 1.0);
}

template <DecodeOp Op>
DecodeLayout layout(const OpCall& call) {
  DecodeLayout L{};
  if constexpr (Op == DecodeOp::kMha) {  // q [B, S_q, H, D], k [B, N, H, D]: the S_q tokens are a head's rows
    const mha::View v(call);
    L.q = &v.q(), L.k = &v.k(), L.v = &v.v(), L.o = &v.o();
    L.batch = L.q->size(0), L.group = L.q->size(1), L.kv_heads = L.q->size(2), L.dim = L.q->size(3);
    L.q_sb = L.group * L.kv_heads * L.dim, L.q_sh = L.dim, L.q_sg = L.kv_heads * L.dim;
    L.n_kv = L.k->size(1);
    L.kv_sb = L.n_kv * L.kv_heads * L.dim, L.kv_st = L.kv_heads * L.dim, L.kv_sh = L.dim;
    L.scale = scale_or_default(std::nullopt, L.dim), L.softcap = 0.0;
  } else {
    using View = std::conditional_t<Op == DecodeOp::kGqa, gqa::View, gqa_paged::View>;
    const View v(call);
    L.q = &v.q(), L.k = &v.k(), L.v = &v.v(), L.o = &v.o();
    L.batch = L.q->size(0), L.dim = L.q->size(2);
    L.kv_heads = Op == DecodeOp::kGqa ? L.k->size(2) : L.k->size(1);
    L.group = L.kv_heads > 0 ? L.q->size(1) / L.kv_heads : 0;
    L.q_sb = L.q->size(1) * L.dim, L.q_sh = L.group * L.dim, L.q_sg = L.dim;
    L.kv_st = L.kv_heads * L.dim, L.kv_sh = L.dim;
    if constexpr (Op == DecodeOp::kGqa) {
      L.n_kv = L.k->size(1), L.kv_sb = L.n_kv * L.kv_st;
    } else {
      L.lengths = v.real_seqlen_kv().template const_data_ptr<int>();
      L.table = v.block_table().template const_data_ptr<int>();
      L.page_size = v.page_size(), L.pages = v.block_table().size(1), L.pool_rows = L.k->size(0);
      L.n_kv = L.pages * L.page_size, L.kv_sb = 0;
    }
    L.scale = scale_or_default(v.sm_scale(), L.dim), L.softcap = v.softcap().value_or(0.0);
  }
  return L;
}

class DecodeKernel final : public Kernel {
 public:
  DecodeKernel(LoadedKernel fwd, LoadedKernel merge, DecodeSpec s, DecodeLayout (*read)(const OpCall&), int slots,
               bool dependent_merge)
      : fwd_(std::move(fwd)),
        merge_(std::move(merge)),
        s_(std::move(s)),
        read_(read),
        slots_(slots),
        dependent_merge_(dependent_merge) {}

  void launch(const OpCall& call) const override {
    const DecodeLayout L = read_(call);
    const int64_t g_tiles = (L.group + s_.g - 1) / s_.g;
    const int64_t ctas = L.batch * L.kv_heads * g_tiles;
    if (ctas == 0 || L.dim == 0) return;  // nothing to write
    const int splits = decode_splits(ctas, L.n_kv, slots_);
    long long rows = L.batch * L.kv_heads * L.group;
    at::Tensor part;  // splits x rows x (D values + 1 lse), float32, on the call's stream
    float *part_o = nullptr, *part_lse = nullptr;
    if (splits > 1) {
      part = at::empty({static_cast<int64_t>(splits) * rows * (L.dim + 1)}, L.q->options().dtype(at::kFloat));
      part_o = part.data_ptr<float>();
      part_lse = part_o + static_cast<int64_t>(splits) * rows * L.dim;
    }
    const void *q = L.q->const_data_ptr(), *k = L.k->const_data_ptr(), *v = L.v->const_data_ptr();
    void* o = L.o->mutable_data_ptr();
    long long q_sb = L.q_sb, q_sh = L.q_sh, q_sg = L.q_sg, kv_sb = L.kv_sb, kv_st = L.kv_st, kv_sh = L.kv_sh;
    int dim = static_cast<int>(L.dim), n_kv = static_cast<int>(L.n_kv), page_size = static_cast<int>(L.page_size),
        pages = static_cast<int>(L.pages), pool_pages = static_cast<int>(L.pool_rows / L.page_size),
        kv_heads = static_cast<int>(L.kv_heads), group = static_cast<int>(L.group), tiles = static_cast<int>(g_tiles),
        n_splits = splits;
    float scale = static_cast<float>(L.scale), softcap = static_cast<float>(L.softcap);
    const int *lengths = L.lengths, *table = L.table;
    void* args[] = {&q,        &k,      &v,       &o,        &part_o,  &part_lse, &lengths, &table,
                    &q_sb,     &q_sh,   &q_sg,    &q_sb,     &q_sh,    &q_sg,     &kv_sb,   &kv_st,
                    &kv_sh,    &dim,    &n_kv,    &page_size, &pages,  &pool_pages, &kv_heads, &group,
                    &tiles,    &n_splits, &rows,  &scale,    &softcap};
    const int smem = s_.mma() ? decode_mma_smem_bytes(s_.dim, s_.stages) : 0;
    nvrtc::launch(fwd_, static_cast<unsigned>(ctas * splits), kDecodeCtaThreads, static_cast<unsigned>(smem), args);
    if (splits > 1) {
      const float* po = part_o;
      const float* pl = part_lse;
      void* margs[] = {&po, &pl, &o, &q_sb, &q_sh, &q_sg, &dim, &kv_heads, &group, &n_splits, &rows};
      if (dependent_merge_) nvrtc::launch_dependent(merge_, static_cast<unsigned>(rows), 128, 0, margs);
      else nvrtc::launch(merge_, static_cast<unsigned>(rows), 128, 0, margs);
    }
  }

 private:
  LoadedKernel fwd_, merge_;
  DecodeSpec s_;
  DecodeLayout (*read_)(const OpCall&);
  int slots_;  // CTAs the GPU holds at once
  bool dependent_merge_;
};

template <DecodeOp Op>
KernelBuilder decode_builder() { return spec_builder(DecodeFamily<Op>{}); }

}  // namespace

int decode_splits(int64_t ctas, int64_t max_tokens, int slots) {
  const int64_t want = std::max<int64_t>(1, slots / ctas);  // one wave: a second, partly filled, costs a whole one
  const int64_t most = std::max<int64_t>(1, max_tokens / kDecode.min_split_tokens);
  return static_cast<int>(std::clamp<int64_t>(std::min(want, most), 1, kDecode.max_splits));
}

template <DecodeOp Op>
DecodeProblem DecodeFamily<Op>::problem(const OpCall& call) const {
  const DecodeLayout L = layout<Op>(call);
  const int elem = static_cast<int>(c10::elementSize(L.q->scalar_type()));
  const int max_vec = access_width({L.q->const_data_ptr(), L.k->const_data_ptr(), L.v->const_data_ptr(),
                                    L.o->const_data_ptr()}, elem);
  return DecodeProblem{L.q->scalar_type(), L.dim, row_access_width(L.q->scalar_type(), L.dim, max_vec), L.group,
                       Op == DecodeOp::kGqaPaged};
}

int decode_mma_smem_bytes(int dim, int stages) { return (kMmaRows + kMmaWarps * stages * 2 * kMmaTile) * dim * 2; }

template <DecodeOp Op>
DecodeSpec DecodeFamily<Op>::plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const {
  const bool mma_shape = (q.dtype == c10::kHalf || q.dtype == c10::kBFloat16) && q.dim > 0 && q.dim % 64 == 0 &&
                         q.dim <= 256 && q.vec == 8 && dev.sm() >= 80;
  if (mma_shape) {
    // Three stages where they fit (two tiles in flight a warp), else two.
    for (int stages = 3; stages >= 2; --stages)
      if (decode_mma_smem_bytes(static_cast<int>(q.dim), stages) <= dev.max_smem_optin)
        return DecodeSpec{q.dtype, q.vec, 0, 0, kMmaRows, static_cast<int>(q.dim), stages, q.paged, dev.arch};
  }
  const int64_t accesses = std::max<int64_t>(1, (q.dim + q.vec - 1) / q.vec);
  const int lanes = accesses >= 32 ? 32 : next_pow2(accesses);
  const int nv = static_cast<int>((accesses + lanes - 1) / lanes);
  const int per_lane = nv * q.vec;
  int g = std::min<int64_t>(next_pow2(std::max<int64_t>(q.group, 1)), kDecode.max_rows);
  while (g > 1 && g * per_lane > kDecode.max_lane_floats) g /= 2;
  return DecodeSpec{q.dtype, q.vec, lanes, nv, g, 0, 0, q.paged, dev.arch};
}

template <DecodeOp Op>
std::shared_ptr<const Kernel> DecodeFamily<Op>::make(const Spec& s, std::vector<LoadedKernel> k,
                                                     const DeviceInfo& dev) const {
  int per_sm = kDecode.ctas_per_sm;
  if (s.mma()) {
    const int smem = decode_mma_smem_bytes(s.dim, s.stages);
    allow_dynamic_smem(k[0], smem, dev);
    per_sm = std::clamp(dev.smem_per_sm / (smem + dev.reserved_smem), 1, kDecode.max_mma_ctas_per_sm);
  }
  return std::make_shared<DecodeKernel>(std::move(k[0]), std::move(k[1]), s, &layout<Op>, per_sm * dev.sm_count,
                                        s.mma() && dependent_launch_supported(dev));
}

template struct DecodeFamily<DecodeOp::kGqa>;
template struct DecodeFamily<DecodeOp::kGqaPaged>;
template struct DecodeFamily<DecodeOp::kMha>;

std::vector<jit::KernelSource> DecodeSpec::sources() const {
  const std::string t = short_type_name(dtype), ty = kernel_type_name(dtype), p = paged ? "true" : "false";
  const std::string merge_expr = "tileops::decode_merge<" + ty + ">";
  jit::KernelSource merge = make_source("decode_merge__" + t + "__" + arch, "attention/decode.cuh", merge_expr, arch);
  if (mma()) {
    const std::string name = "decode_mma_fwd__" + t + "__d" + std::to_string(dim) + "_s" + std::to_string(stages) +
                             (paged ? "_paged" : "") + "__" + arch;
    const std::string expr = "tileops::decode_mma_fwd<" + ty + ", " + std::to_string(dim) + ", " +
                             std::to_string(stages) + ", " + p + ">";
    return {make_source(name, "attention/decode_mma.cuh", expr, arch), std::move(merge)};
  }
  const std::string fwd = "decode_fwd__" + t + "__v" + std::to_string(vec) + "_l" + std::to_string(lanes) + "_n" +
                          std::to_string(nv) + "_g" + std::to_string(g) + (paged ? "_paged" : "") + "__" + arch;
  const std::string fwd_expr = "tileops::decode_fwd<" + ty + ", " + std::to_string(vec) + ", " +
                               std::to_string(lanes) + ", " + std::to_string(nv) + ", " + std::to_string(g) + ", " + p +
                               ">";
  return {make_source(fwd, "attention/decode.cuh", fwd_expr, arch), std::move(merge)};
}

std::string DecodeSpec::describe() const {
  const std::string t = short_type_name(dtype);
  if (mma())
    return "decode_mma_fwd(dtype=" + t + ", dim=" + std::to_string(dim) + ", stages=" + std::to_string(stages) +
           (paged ? ", paged" : "") + ") + decode_merge";
  return "decode_fwd(dtype=" + t + ", vec=" + std::to_string(vec) + ", lanes=" + std::to_string(lanes) +
         ", nv=" + std::to_string(nv) + ", rows=" + std::to_string(g) + (paged ? ", paged" : "") + ") + decode_merge";
}

namespace {
KernelBuilder gqa_decode_builder() { return decode_builder<DecodeOp::kGqa>(); }
KernelBuilder gqa_decode_paged_builder() { return decode_builder<DecodeOp::kGqaPaged>(); }
KernelBuilder mha_decode_builder() { return decode_builder<DecodeOp::kMha>(); }
}  // namespace

TILEOPS_BUILTIN_KERNEL(nvrtc, GroupedQueryAttentionDecodeWithKVCacheFwdOp, gqa_decode_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, GroupedQueryAttentionDecodePagedWithKVCacheFwdOp, gqa_decode_paged_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, MultiHeadAttentionDecodeWithKVCacheFwdOp, mha_decode_builder);

}  // namespace tileops::nvrtc

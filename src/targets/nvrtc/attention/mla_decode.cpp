// MultiHeadLatentAttentionDecodeWithKVCacheFwdOp on the nvrtc target (what serves CUDA; the latent
// dims its plan leaves out run through the reference's ATen formula): the plan, mla_decode_fwd's
// launch (+ decode_merge when the cache is split).
#include "targets/nvrtc/attention/mla_decode.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/attention/decode.h"
#include "targets/nvrtc/spec_builder.h"
#include "targets/reference/attention.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace mla = tileops::ops::attention_multi_head_latent_attention_decode_with_kv_cache_fwd;

// kMmaWarps, kMmaRows and kMmaTile of decode_mma.cuh; at most 4 CTAs an SM, as decode_mma_fwd.
constexpr int kMlaWarps = 4, kMlaRows = 16, kMlaTile = 16, kMlaMaxCtasPerSm = 4;

class MlaDecodeKernel final : public Kernel {
 public:
  MlaDecodeKernel(LoadedKernel fwd, LoadedKernel merge, MlaDecodeSpec s, int slots, bool dependent_merge)
      : fwd_(std::move(fwd)), merge_(std::move(merge)), s_(std::move(s)), slots_(slots),
        dependent_merge_(dependent_merge) {}

  void launch(const OpCall& call) const override {
    const mla::View v(call);
    const at::Tensor &q = v.q(), &k = v.k(), &o = v.o();
    const int64_t batch = q.size(0), heads = q.size(1), n_kv = k.size(1);
    if (batch == 0 || heads == 0) return;  // nothing to write
    TORCH_CHECK(n_kv <= 0x7fffffffLL && heads <= 0x7fffffffLL, call.op_name, ": N_kv and H must fit 32 bits");
    const int64_t g_tiles = (heads + kMlaRows - 1) / kMlaRows;
    const int64_t ctas = batch * g_tiles;
    const int splits = decode_splits(ctas, n_kv, slots_);
    TORCH_CHECK(ctas * splits <= 0x7fffffffLL, call.op_name, ": too many requests and heads for one launch");
    long long rows = batch * heads;
    at::Tensor part;  // splits x rows x (D values + 1 lse), float32, on the call's stream
    float *part_o = nullptr, *part_lse = nullptr;
    if (splits > 1) {
      part = at::empty({static_cast<int64_t>(splits) * rows * (s_.dim + 1)}, q.options().dtype(at::kFloat));
      part_o = part.data_ptr<float>();
      part_lse = part_o + static_cast<int64_t>(splits) * rows * s_.dim;
    }
    const void *qp = q.const_data_ptr(), *qpe = v.q_pe().const_data_ptr(), *kp = k.const_data_ptr(),
               *kpe = v.k_pe().const_data_ptr();
    void* op_ = o.mutable_data_ptr();
    int h = static_cast<int>(heads), n = static_cast<int>(n_kv), tiles = static_cast<int>(g_tiles), n_splits = splits;
    float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s_.dim + s_.pe_dim)));
    void* args[] = {&qp, &qpe, &kp, &kpe, &op_, &part_o, &part_lse, &h, &n, &tiles, &n_splits, &rows, &scale};
    nvrtc::launch(fwd_, static_cast<unsigned>(ctas * splits), kMlaWarps * 32,
                  static_cast<unsigned>(mla_decode_smem_bytes(s_.dim, s_.pe_dim, s_.stages)), args);
    if (splits > 1) {
      const float *po = part_o, *pl = part_lse;
      long long o_sb = heads * s_.dim, o_sh = 0, o_sg = s_.dim;
      int dim = s_.dim, kv_heads = 1, group = h;
      void* margs[] = {&po, &pl, &op_, &o_sb, &o_sh, &o_sg, &dim, &kv_heads, &group, &n_splits, &rows};
      if (dependent_merge_) nvrtc::launch_dependent(merge_, static_cast<unsigned>(rows), 128, 0, margs);
      else nvrtc::launch(merge_, static_cast<unsigned>(rows), 128, 0, margs);
    }
  }

 private:
  LoadedKernel fwd_, merge_;
  MlaDecodeSpec s_;
  int slots_;  // CTAs the GPU holds at once
  bool dependent_merge_;
};

struct MlaDecodeFamily {
  using Problem = MlaDecodeProblem;
  using Spec = MlaDecodeSpec;
  Problem problem(const OpCall& call) const {
    const mla::View v(call);
    const bool aligned = access_width({v.q().const_data_ptr(), v.q_pe().const_data_ptr(), v.k().const_data_ptr(),
                                       v.k_pe().const_data_ptr(), v.o().const_data_ptr()}, 1) == 16;
    return {v.q().scalar_type(), v.q().size(2), v.pe_dim(), aligned};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const { return mla_decode_plan(q, dev); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    if (!s.kernel()) return function_kernel(&reference::mla_decode_aten);
    const int smem = mla_decode_smem_bytes(s.dim, s.pe_dim, s.stages);
    allow_dynamic_smem(k[0], smem, dev);
    const int per_sm = std::clamp(dev.smem_per_sm / (smem + dev.reserved_smem), 1, kMlaMaxCtasPerSm);
    return std::make_shared<MlaDecodeKernel>(std::move(k[0]), std::move(k[1]), s, per_sm * dev.sm_count,
                                             dependent_launch_supported(dev));
  }
};

KernelBuilder mla_decode_builder() { return spec_builder(MlaDecodeFamily{}); }

}  // namespace

int mla_decode_smem_bytes(int dim, int pe_dim, int stages) {
  const int pipeline = (kMlaRows + kMlaWarps * stages * kMlaTile) * (dim + pe_dim) * 2;
  const int states = kMlaWarps * kMlaRows * (dim + 2) * 4;
  return std::max(pipeline, states);
}

MlaDecodeSpec mla_decode_plan(const MlaDecodeProblem& q, const DeviceFacts& dev) {
  const bool shape = (q.dtype == c10::kHalf || q.dtype == c10::kBFloat16) && q.aligned && q.dim > 0 &&
                     q.dim % 16 == 0 && q.dim <= 256 && q.pe_dim >= 0 && q.pe_dim % 8 == 0 &&
                     (q.dim + q.pe_dim) % 64 == 0 && dev.sm() >= 80;
  if (shape) {
    const int d = static_cast<int>(q.dim), pe = static_cast<int>(q.pe_dim);
    for (int stages = 3; stages >= 2; --stages)  // three where they fit, else two
      if (mla_decode_smem_bytes(d, pe, stages) <= dev.max_smem_optin) return {q.dtype, d, pe, stages, dev.arch};
  }
  return {q.dtype, 0, 0, 0, ""};
}

std::vector<jit::KernelSource> MlaDecodeSpec::sources() const {
  if (!kernel()) return {};
  const std::string t = short_type_name(dtype), ty = kernel_type_name(dtype);
  const std::string name = "mla_decode_fwd__" + t + "__d" + std::to_string(dim) + "_pe" + std::to_string(pe_dim) +
                           "_s" + std::to_string(stages) + "__" + arch;
  const std::string expr = "tileops::mla_decode_fwd<" + ty + ", " + std::to_string(dim) + ", " +
                           std::to_string(pe_dim) + ", " + std::to_string(stages) + ">";
  return {make_source(name, "attention/decode_mla.cuh", expr, arch),
          make_source("decode_merge__" + t + "__" + arch, "attention/decode.cuh", "tileops::decode_merge<" + ty + ">",
                      arch)};
}

std::string MlaDecodeSpec::describe() const {
  if (!kernel()) return "mla_decode (ATen)";
  return "mla_decode_fwd(dtype=" + std::string(short_type_name(dtype)) + ", dim=" + std::to_string(dim) +
         ", pe_dim=" + std::to_string(pe_dim) + ", stages=" + std::to_string(stages) + ") + decode_merge";
}

TILEOPS_BUILTIN_KERNEL(nvrtc, MultiHeadLatentAttentionDecodeWithKVCacheFwdOp, mla_decode_builder);

}  // namespace tileops::nvrtc

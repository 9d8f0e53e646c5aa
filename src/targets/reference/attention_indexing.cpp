// Attention indexing on the reference target. TopkSelectorFwdOp: per (batch, query, KV group) row, the
// positions of the topk largest scores inside the query's KV range, -1 past the range's size; two
// stable sorts (by score, then in-range first) so that ties and NaN follow torch.topk.
// FP8LightningIndexerFwdOp: the indexer's logits from float8 q and k (bfloat16 ones quantised first, as
// TileOPs' op does), in float32 a chunk of queries at a time. The oracle for kernels to come, and what
// serves CUDA tensors meanwhile.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/where.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace topk_selector = tileops::ops::attention_indexing_topk_selector_fwd;
namespace lightning = tileops::ops::attention_indexing_fp8_lightning_indexer_fwd;

class TopkSelectorReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const topk_selector::View v(call);
    const at::Tensor& score = v.index_score();  // [B, S, N, G]
    at::Tensor out = v.indexes();               // [B, S, G, K]
    if (out.numel() == 0) return;
    const int64_t n = score.size(2), k = v.topk();
    const at::TensorOptions longs = score.options().dtype(at::kLong);
    const at::Tensor lo = v.starts().to(at::kLong).clamp(0, n).view({score.size(0), score.size(1), 1, 1});
    const at::Tensor hi = v.ends().to(at::kLong).clamp(0, n).view({score.size(0), score.size(1), 1, 1});
    const at::Tensor pos = at::arange(n, longs).view({1, 1, n, 1});
    const at::Tensor in_range = ((pos >= lo) & (pos < hi)).to(at::kByte).expand(score.sizes());
    // Descending score (NaN first, ties by position), then the in-range positions ahead of the rest.
    const at::Tensor by_score = std::get<1>(at::sort(score, true, 2, true));
    const at::Tensor by_range = std::get<1>(at::sort(in_range.gather(2, by_score), true, 2, true));
    const at::Tensor chosen = by_score.gather(2, by_range).narrow(2, 0, k);  // [B, S, K, G]
    const at::Tensor slot = at::arange(k, longs).view({1, 1, k, 1});
    const at::Tensor count = (hi - lo).clamp_min(0);
    out.copy_(at::where(slot < count, chosen, -1).permute({0, 1, 3, 2}));
  }
};

KernelBuilder topk_selector_builder() { return stateless_builder<TopkSelectorReference>("topk_selector_fwd (ATen)"); }

class LightningIndexerReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const lightning::View v(call);
    const at::Tensor& q = v.index_q();  // [b, s, h, d]
    const at::Tensor& k = v.index_k();  // [b, n, g, d]
    at::Tensor out = v.logits();        // [b, s, n, g] float32
    if (out.numel() == 0) return;
    const int64_t batch = q.size(0), queries = q.size(1), heads = q.size(2), dim = q.size(3);
    const int64_t keys = k.size(1), groups = k.size(2);
    at::Tensor q8 = q, k8 = k, k_scale;  // k_scale [b, n, g] float32, undefined: 1
    if (q.scalar_type() == at::kFloat8_e4m3fn) {
      if (v.index_k_scale()) k_scale = *v.index_k_scale();
    } else {  // bfloat16 (dtype_combos): quantised as TileOPs' op does before its FP8 kernel
      TORCH_CHECK_VALUE(v.index_k_scale() == nullptr, call.op_name, ": 'index_k_scale' scales a float8_e4m3fn index_k; ",
                        "a bfloat16 index_k is quantised per row by the op and takes none");
      q8 = q.to(at::kFloat8_e4m3fn);
      const at::Tensor kf = k.to(at::kFloat);
      const at::Tensor sf = kf.abs().amax(-1, true).clamp_min(1e-4).div(448.0);  // [b, n, g, 1]
      k8 = (kf * sf.reciprocal()).to(at::kFloat8_e4m3fn);
      k_scale = sf.squeeze(-1);
    }
    const at::Tensor kt = k8.to(at::kFloat).permute({0, 2, 3, 1}).unsqueeze(2);  // [b, g, 1, d, n]
    const at::Tensor ks = k_scale.defined() ? k_scale.permute({0, 2, 1}).view({batch, groups, 1, 1, keys}) : at::Tensor();
    const at::Tensor w = v.weights().view({queries, groups, heads / groups}).permute({1, 0, 2}).unsqueeze(-1);  // [g, s, hg, 1]
    // Scores [b, g, chunk, hg, n] in float32, up to 256 MB a chunk.
    const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 26) / std::max<int64_t>(1, batch * heads * keys));
    for (int64_t s0 = 0; s0 < queries; s0 += chunk) {
      const int64_t n = std::min(chunk, queries - s0);
      const at::Tensor qf = q8.narrow(1, s0, n).to(at::kFloat).view({batch, n, groups, heads / groups, dim})
                                .permute({0, 2, 1, 3, 4});  // [b, g, n, hg, d]
      at::Tensor t = at::relu(at::matmul(qf, kt)).mul_(w.narrow(1, s0, n));  // relu(q . k) * weights[s, h]
      if (ks.defined()) t.mul_(ks);                                           // * k_scale[b, n, g], per head
      out.narrow(1, s0, n).copy_(t.sum(3).permute({0, 2, 3, 1}));            // the group's heads summed
    }
    if (!v.clean_logits()) return;
    // -inf outside [lo, hi): lo = clamp(ks, 0, n), hi = clamp(ke, lo, n), as TileOPs' clean kernel.
    const at::Tensor lo = v.cu_seqlen_ks().to(at::kLong).clamp(0, keys);
    const at::Tensor hi = at::maximum(v.cu_seqlen_ke().to(at::kLong).clamp(0, keys), lo);
    const at::Tensor j = at::arange(keys, lo.options()).view({1, keys});
    const at::Tensor outside = (j < lo.view({queries, 1})) | (j >= hi.view({queries, 1}));  // [s, n]
    out.masked_fill_(outside.view({1, queries, keys, 1}), -INFINITY);
  }
};

KernelBuilder lightning_indexer_builder() {
  return stateless_builder<LightningIndexerReference>("fp8_lightning_indexer_fwd (ATen)");
}

}  // namespace

TILEOPS_BUILTIN_KERNEL(reference, TopkSelectorFwdOp, topk_selector_builder);
TILEOPS_BUILTIN_KERNEL(reference, FP8LightningIndexerFwdOp, lightning_indexer_builder);

}  // namespace tileops::reference

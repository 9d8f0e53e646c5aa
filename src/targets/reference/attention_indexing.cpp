// TopkSelectorFwdOp on the reference target: per (batch, query, KV group) row, the positions of the
// topk largest scores inside the query's KV range, -1 past the range's size; two stable sorts (by
// score, then in-range first) so that ties and NaN follow torch.topk. The oracle for kernels to
// come, and what serves CUDA tensors meanwhile.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/where.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace topk_selector = tileops::ops::attention_indexing_topk_selector_fwd;

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

}  // namespace

TILEOPS_BUILTIN_KERNEL(reference, TopkSelectorFwdOp, topk_selector_builder);

}  // namespace tileops::reference

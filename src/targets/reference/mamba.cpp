// Mamba-2's chunked SSD stages and decode step on the reference target, as plain float32 ATen
// (one step per chunk for the state scan): the oracle for kernels to come.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/einsum.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softplus.h>
#include <ATen/ops/tril.h>
#include <ATen/ops/zeros.h>

#include <vector>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace passing = tileops::ops::mamba_ssd_state_passing_fwd;
namespace decode = tileops::ops::mamba_ssd_decode_fwd;
namespace cumsum = tileops::ops::mamba_da_cumsum_fwd;
namespace chunk_state = tileops::ops::mamba_ssd_chunk_state_fwd;
namespace chunk_scan = tileops::ops::mamba_ssd_chunk_scan_fwd;
namespace cb_producer = tileops::ops::mamba_cb_producer_fwd;

// The group each of `heads` heads reads (heads / groups consecutive heads share one).
at::Tensor group_of_heads(int64_t heads, int64_t groups, const at::Tensor& like) {
  return at::arange(heads, like.options().dtype(at::kLong)).div(heads / groups, "floor");
}

// [B, S, ...] as [B, NC, Q, ...].
at::Tensor chunked(const at::Tensor& t, int64_t chunks) {
  std::vector<int64_t> shape{t.size(0), chunks, t.size(1) / chunks};
  for (int64_t d = 2; d < t.dim(); ++d) shape.push_back(t.size(d));
  return t.reshape(shape);
}

class DaCumsumReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const cumsum::View v(call);
    at::Tensor dt = v.dt();  // [B, S, H], float32
    if (v.dt_bias()) dt = dt + *v.dt_bias();
    if (v.dt_softplus()) dt = at::softplus(dt);
    dt = at::clamp(dt, v.dt_min(), v.dt_max());
    const at::Tensor per_chunk = chunked(dt, v.da_cumsum().size(2));  // [B, NC, Q, H]
    v.dt_out().copy_(per_chunk.permute({0, 3, 1, 2}));
    v.da_cumsum().copy_(at::cumsum(per_chunk * v.a(), 2).permute({0, 3, 1, 2}));
  }
};

class ChunkStateReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const chunk_state::View v(call);
    at::Tensor states = v.states();  // [B, NC, H, P, N]
    const int64_t chunks = states.size(1), heads = states.size(2);
    const at::Tensor x = chunked(v.x().to(at::kFloat), chunks);                                   // [B, NC, Q, H, P]
    const at::Tensor b = chunked(v.bmat().to(at::kFloat), chunks)
                             .index_select(3, group_of_heads(heads, v.bmat().size(2), states));  // [B, NC, Q, H, N]
    const at::Tensor da = v.da_cumsum().permute({0, 2, 1, 3});                                    // [B, NC, H, Q]
    at::Tensor w = at::exp(at::clamp(da.narrow(3, da.size(3) - 1, 1) - da, std::nullopt, 0.0)) *
                   v.dt().to(at::kFloat).permute({0, 2, 1, 3});
    if (const at::Tensor* seq_idx = v.seq_idx()) {  // only the chunk's last sequence, never a -1 pad
      const at::Tensor ids = chunked(*seq_idx, chunks);  // [B, NC, Q]
      const at::Tensor last = ids.narrow(2, ids.size(2) - 1, 1);
      w = w * ((last >= 0) & (ids == last)).unsqueeze(2).to(at::kFloat);
    }
    states.copy_(at::einsum("bchq,bcqhp,bcqhn->bchpn", {w, x, b}));
  }
};

class CBProducerReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const cb_producer::View v(call);
    at::Tensor cb = v.cb();  // [B, NC, G, Q, Q]
    const int64_t chunks = cb.size(1), q = cb.size(3);
    const at::Tensor c = chunked(v.c_mat().to(at::kFloat), chunks).permute({0, 1, 3, 2, 4});  // [B, NC, G, Q, N]
    const at::Tensor b = chunked(v.b_mat().to(at::kFloat), chunks).permute({0, 1, 3, 4, 2});  // [B, NC, G, N, Q]
    const at::Tensor causal = at::tril(at::ones({q, q}, cb.options().dtype(at::kBool)));
    cb.copy_(at::matmul(c, b).masked_fill(causal.logical_not(), 0.0));
  }
};

class ChunkScanReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const chunk_scan::View v(call);
    at::Tensor y = v.y();  // [B, S, H, P]
    const int64_t chunks = v.cb().size(1), heads = y.size(2), q = v.cb().size(3);
    const at::Tensor groups = group_of_heads(heads, v.cb().size(2), y);
    const at::Tensor x = chunked(v.x().to(at::kFloat), chunks);                        // [B, NC, Q, H, P]
    const at::Tensor c = chunked(v.c().to(at::kFloat), chunks).index_select(3, groups);  // [B, NC, Q, H, N]
    const at::Tensor da = v.da_cumsum();                                                // [B, H, NC, Q]
    // From the state entering the chunk, decayed to each position.
    const at::Tensor history = at::einsum("bclhn,bchpn->bclhp", {c, v.prev_states()}) *
                               at::exp(da.permute({0, 2, 3, 1})).unsqueeze(-1);
    // Inside the chunk: cb[l, s] * exp(da[l] - da[s]) * dt[s] over s <= l.
    const at::Tensor causal = at::tril(at::ones({q, q}, y.options().dtype(at::kBool)));
    const at::Tensor decay =
        at::exp(da.unsqueeze(-1) - da.unsqueeze(-2)).masked_fill(causal.logical_not(), 0.0).permute({0, 2, 1, 3, 4});
    const at::Tensor weights = v.cb().to(at::kFloat).index_select(2, groups) * decay *
                               v.dt().to(at::kFloat).permute({0, 2, 1, 3}).unsqueeze(-2);  // [B, NC, H, L, S]
    const at::Tensor inside = at::einsum("bchls,bcshp->bclhp", {weights, x});
    y.copy_((history + inside).reshape(y.sizes()));
  }
};

class StatePassingReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const passing::View v(call);
    const at::Tensor& states = v.states();  // [B, NC, H, N]
    at::Tensor chunk_states = v.chunk_states(), final_states = v.final_states();
    at::Tensor s = v.initial_states() ? v.initial_states()->to(at::kFloat)
                                      : at::zeros(final_states.sizes(), final_states.options());
    const at::Tensor decay = at::exp(v.da_chunk_cumsum()).unsqueeze(-1);  // [B, H, NC, 1]
    for (int64_t c = 0; c < states.size(1); ++c) {
      chunk_states.select(1, c).copy_(s);  // the state entering chunk c
      s = decay.select(2, c) * s + states.select(1, c).to(at::kFloat);
    }
    final_states.copy_(s);
  }
};

class DecodeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const decode::View v(call);
    at::Tensor state = v.state();  // [B, H, P, N], updated in place
    const at::Tensor group_of = group_of_heads(state.size(1), v.b_in().size(1), state);
    const at::Tensor b = v.b_in().to(at::kFloat).index_select(1, group_of).unsqueeze(2);  // [B, H, 1, N]
    const at::Tensor c = v.c_in().to(at::kFloat).index_select(1, group_of).unsqueeze(2);
    const at::Tensor dt = v.dt().unsqueeze(-1);                                           // [B, H, P, 1]
    const at::Tensor decay = at::exp(dt * v.a().unsqueeze(0));
    state.copy_(decay * state + dt * v.x().to(at::kFloat).unsqueeze(-1) * b);
    v.y_out().copy_((state * c).sum(-1));
  }
};

KernelBuilder state_passing_builder() { return stateless_builder<StatePassingReference>("ssd_state_passing_fwd (ATen)"); }
KernelBuilder decode_builder() { return stateless_builder<DecodeReference>("ssd_decode_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, SSDStatePassingFwdOp, state_passing_builder);
TILEOPS_BUILTIN_KERNEL(reference, SSDDecodeFwdOp, decode_builder);
KernelBuilder da_cumsum_builder() { return stateless_builder<DaCumsumReference>("da_cumsum_fwd (ATen)"); }
KernelBuilder chunk_state_builder() { return stateless_builder<ChunkStateReference>("ssd_chunk_state_fwd (ATen)"); }
KernelBuilder chunk_scan_builder() { return stateless_builder<ChunkScanReference>("ssd_chunk_scan_fwd (ATen)"); }
KernelBuilder cb_producer_builder() { return stateless_builder<CBProducerReference>("cb_producer_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, DaCumsumFwdOp, da_cumsum_builder);
TILEOPS_BUILTIN_KERNEL(reference, CBProducerFwdOp, cb_producer_builder);
TILEOPS_BUILTIN_KERNEL(reference, SSDChunkStateFwdOp, chunk_state_builder);
TILEOPS_BUILTIN_KERNEL(reference, SSDChunkScanFwdOp, chunk_scan_builder);

}  // namespace
}  // namespace tileops::reference

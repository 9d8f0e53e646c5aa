// Mamba2FwdOp: Mamba-2's chunked SSD forward as its five stages, each called through the dispatcher
// (registered CompositeImplicitAutograd, generated), so tracing records mamba_da_cumsum_fwd,
// mamba_cb_producer_fwd, mamba_ssd_chunk_state_fwd, mamba_ssd_state_passing_fwd and
// mamba_ssd_chunk_scan_fwd, never this op. The state scan runs on P * N flattened states.
#include <ATen/core/Tensor.h>

#include "tileops_generated/callers.h"
#include "tileops_generated/composite.h"

namespace tileops::composite {

std::tuple<at::Tensor, at::Tensor> mamba_mamba2_fwd(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& a,
                                                    const at::Tensor& b, const at::Tensor& c,
                                                    const std::optional<at::Tensor>& dt_bias,
                                                    const std::optional<at::Tensor>& initial_states,
                                                    int64_t chunk_size, bool dt_softplus) {
  // SymInts where only reshapes read them: dynamic shapes trace without specialising there;
  // CBProducerFwdOp's int params (TileOPs' signature) specialise the sizes they name.
  const c10::SymInt batch = x.sym_size(0), heads = x.sym_size(2), head_dim = x.sym_size(3), d_state = b.sym_size(3);
  const c10::SymInt chunks = x.sym_size(1) / chunk_size;
  auto concrete = [](const c10::SymInt& v) { return v.guard_int(__FILE__, __LINE__); };
  const auto [dt_out, da] = call::mamba_da_cumsum_fwd(dt, a, dt_bias, chunk_size, x.scalar_type(), dt_softplus,
                                                          0.0, std::nullopt);  // [B, H, NC, Q] each
  const at::Tensor cb = call::mamba_cb_producer_fwd(c, b, concrete(batch), concrete(chunks), concrete(b.sym_size(2)),
                                                        chunk_size, concrete(d_state));
  const at::Tensor states = call::mamba_ssd_chunk_state_fwd(x, b, dt_out, da, std::nullopt);  // [B, NC, H, P, N]
  const c10::SymInt flat = head_dim * d_state;
  std::optional<at::Tensor> initial_flat;
  if (initial_states) initial_flat = initial_states->reshape_symint({batch, heads, flat});
  const auto [entering, final_flat] =
      call::mamba_ssd_state_passing_fwd(states.reshape_symint({batch, chunks, heads, flat}), da.select(3, -1),
                                        initial_flat);  // the chunks' last cumsum: [B, H, NC]
  const at::Tensor prev_states = entering.reshape_symint({batch, chunks, heads, head_dim, d_state});
  const at::Tensor y = call::mamba_ssd_chunk_scan_fwd(x, cb, da, c, prev_states, dt_out);
  return {y, final_flat.reshape_symint({batch, heads, head_dim, d_state})};
}

}  // namespace tileops::composite

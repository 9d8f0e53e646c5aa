// QKNormRopeFwdOp: per-head RMSNorm of q and k, then Neox (is_neox) or GPT-J RoPE, written back
// into q and k. Registered CompositeImplicitAutograd (generated): the sub-ops are called through the
// dispatcher, so tracing records their operators (norm_rms_norm_fwd twice, then
// position_rope_neox_cached_fwd_writes_k_writes_q or position_rope_non_neox_cached_fwd_writes_k_writes_q) and
// never this op. The in-place steps only touch fresh tensors (qn, kn) and then copy_ into the
// caller's q/k: functionalization turns those into functional ops plus input write-backs.
#include <ATen/core/Tensor.h>

#include "tileops_generated/callers.h"
#include "tileops_generated/composite.h"

namespace tileops::composite {

void position_qk_norm_rope_fwd_writes_k_writes_q(const at::Tensor& positions, const at::Tensor& q, const at::Tensor& k,
                                                 const at::Tensor& q_weight, const at::Tensor& k_weight,
                                                 const at::Tensor& cos_sin_cache, std::optional<double> eps,
                                                 bool is_neox) {
  const c10::SymInt head_dim = q.sym_size(2);  // SymInt: dynamic shapes trace without specialising
  const at::Tensor qn = call::norm_rms_norm_fwd(q, q_weight, c10::SymIntArrayRef(&head_dim, 1), eps);
  const at::Tensor kn = call::norm_rms_norm_fwd(k, k_weight, c10::SymIntArrayRef(&head_dim, 1), eps);
  if (is_neox)
    call::position_rope_neox_cached_fwd_writes_k_writes_q(positions, qn, kn, cos_sin_cache);
  else
    call::position_rope_non_neox_cached_fwd_writes_k_writes_q(positions, qn, kn, cos_sin_cache);
  q.copy_(qn);
  k.copy_(kn);
}

}  // namespace tileops::composite

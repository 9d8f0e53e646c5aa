// SSDStatePassingFwdOp and SSDDecodeFwdOp on the reference target: Mamba-2's recurrences as plain
// float32 ATen steps (one per chunk for the scan), the oracle for kernels to come.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/zeros.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace passing = tileops::ops::mamba_ssd_state_passing_fwd;
namespace decode = tileops::ops::mamba_ssd_decode_fwd;

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
    const int64_t heads = state.size(1), groups = v.b_in().size(1);
    const at::Tensor group_of = at::arange(heads, state.options().dtype(at::kLong)).div(heads / groups, "floor");
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

}  // namespace
}  // namespace tileops::reference

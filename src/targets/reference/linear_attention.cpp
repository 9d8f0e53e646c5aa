// Linear attention's recurrent decode steps on the reference target (DeltaNet, Gated DeltaNet,
// GLA), one token per (batch, head) in float32 ATen: the oracle for kernels to come, and what
// serves CUDA tensors meanwhile. The state is read; new_state is the op's fresh output.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/matmul.h>

#include <cmath>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace delta = tileops::ops::linear_attention_delta_net_decode_fwd;
namespace gated = tileops::ops::linear_attention_gated_delta_net_decode_fwd;
namespace gla = tileops::ops::linear_attention_gla_decode_fwd;

// sum_k state[..., k, :] * vec[..., k]: [B, H, DK, DV] x [B, H, DK] -> [B, H, DV].
at::Tensor read_out(const at::Tensor& state, const at::Tensor& vec) {
  return at::matmul(vec.unsqueeze(-2), state).squeeze(-2);
}

// The delta rule with a decay a per (batch, head) (none: DeltaNet), written into o and new_state.
void delta_step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                const at::Tensor* g, const at::Tensor& state, at::Tensor o, at::Tensor new_state) {
  const at::Tensor kf = k.to(at::kFloat), b = beta.to(at::kFloat).unsqueeze(-1);  // [B, H, 1]
  at::Tensor s = state.to(at::kFloat);
  if (g != nullptr) s = s * at::exp(g->to(at::kFloat)).unsqueeze(-1).unsqueeze(-1);
  const at::Tensor v_new = b * (v.to(at::kFloat) - read_out(s, kf));
  const at::Tensor next = s + kf.unsqueeze(-1) * v_new.unsqueeze(-2);
  o.copy_(read_out(next, q.to(at::kFloat)));
  new_state.copy_(next);
}

class DeltaNetDecodeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const delta::View v(call);
    delta_step(v.q(), v.k(), v.v(), v.beta(), nullptr, v.state(), v.o(), v.new_state());
  }
};

class GatedDeltaNetDecodeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gated::View v(call);
    delta_step(v.q(), v.k(), v.v(), v.beta(), &v.g(), v.state(), v.o(), v.new_state());
  }
};

class GlaDecodeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gla::View v(call);
    const int64_t dk = v.q().size(2);
    const double scale = v.scale() > 0 ? v.scale() : 1.0 / std::sqrt(static_cast<double>(dk));
    const at::Tensor next = at::exp(v.gk().to(at::kFloat)).unsqueeze(-1) * v.state().to(at::kFloat) +
                            v.k().to(at::kFloat).unsqueeze(-1) * v.v().to(at::kFloat).unsqueeze(-2);
    v.o().copy_(read_out(next, v.q().to(at::kFloat)).mul_(scale));
    v.new_state().copy_(next);
  }
};

KernelBuilder delta_builder() { return stateless_builder<DeltaNetDecodeReference>("delta_net_decode_fwd (ATen)"); }
KernelBuilder gated_builder() {
  return stateless_builder<GatedDeltaNetDecodeReference>("gated_delta_net_decode_fwd (ATen)");
}
KernelBuilder gla_builder() { return stateless_builder<GlaDecodeReference>("gla_decode_fwd (ATen)"); }

}  // namespace

TILEOPS_BUILTIN_KERNEL(reference, DeltaNetDecodeFwdOp, delta_builder);
TILEOPS_BUILTIN_KERNEL(reference, GatedDeltaNetDecodeFwdOp, gated_builder);
TILEOPS_BUILTIN_KERNEL(reference, GLADecodeFwdOp, gla_builder);

}  // namespace tileops::reference

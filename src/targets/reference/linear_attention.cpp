// Linear attention on the reference target (DeltaNet, Gated DeltaNet, GLA): one token per (batch,
// head) in float32 ATen, a decode step or a sequence's tokens one after another: the oracle for
// kernels to come, and what serves CUDA tensors meanwhile. A decode step reads the state and writes
// new_state, the op's fresh output.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/zeros.h>

#include <cmath>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace delta = tileops::ops::linear_attention_delta_net_decode_fwd;
namespace gated = tileops::ops::linear_attention_gated_delta_net_decode_fwd;
namespace gla = tileops::ops::linear_attention_gla_decode_fwd;
namespace gdn_bthd = tileops::ops::linear_attention_gated_delta_net_prefill_bthd_fwd;
namespace gdn_bhtd = tileops::ops::linear_attention_gated_delta_net_prefill_bhtd_fwd;
namespace gla_seq = tileops::ops::linear_attention_gla_fwd;

// sum_k state[..., k, :] * vec[..., k]: [B, H, DK, DV] x [B, H, DK] -> [B, H, DV].
at::Tensor read_out(const at::Tensor& state, const at::Tensor& vec) {
  return at::matmul(vec.unsqueeze(-2), state).squeeze(-2);
}

// One token of the delta rule on the float32 state s [B, H, DK, DV] (q, k [B, H, DK], v [B, H, DV],
// beta and the log-decay g [B, H], g undefined for DeltaNet): returns the new state; o = its
// read-out at q.
at::Tensor delta_token(const at::Tensor& s, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                       const at::Tensor& g) {
  const at::Tensor kf = k.to(at::kFloat);
  const at::Tensor decayed = g.defined() ? s * at::exp(g.to(at::kFloat)).unsqueeze(-1).unsqueeze(-1) : s;
  const at::Tensor v_new = beta.to(at::kFloat).unsqueeze(-1) * (v.to(at::kFloat) - read_out(decayed, kf));
  return decayed + kf.unsqueeze(-1) * v_new.unsqueeze(-2);
}

// One token of GLA: s [B, H, DK, DV] decayed per key by exp(gk) [B, H, DK], plus k v^T.
at::Tensor gla_token(const at::Tensor& s, const at::Tensor& k, const at::Tensor& v, const at::Tensor& gk) {
  return at::exp(gk.to(at::kFloat)).unsqueeze(-1) * s + k.to(at::kFloat).unsqueeze(-1) * v.to(at::kFloat).unsqueeze(-2);
}

double gla_scale(double scale, int64_t dk) { return scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(dk)); }

void delta_step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                const at::Tensor& g, const at::Tensor& state, at::Tensor o, at::Tensor new_state) {
  const at::Tensor next = delta_token(state.to(at::kFloat), k, v, beta, g);
  o.copy_(read_out(next, q.to(at::kFloat)));
  new_state.copy_(next);
}

// A sequence's tokens along `time` of q/k/v (dim 1 in [B, S, H, D], 2 in [B, H, S, D]; g and beta
// have it at the same place) through the gated delta rule from a zero state.
void gated_delta_sequence(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                          const at::Tensor& beta, int64_t time, at::Tensor o, at::Tensor final_state) {
  at::Tensor s = at::zeros(final_state.sizes(), final_state.options().dtype(at::kFloat));
  for (int64_t t = 0; t < q.size(time); ++t) {
    s = delta_token(s, k.select(time, t), v.select(time, t), beta.select(time, t), g.select(time, t));
    o.select(time, t).copy_(read_out(s, q.select(time, t).to(at::kFloat)));
  }
  final_state.copy_(s);
}

class DeltaNetDecodeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const delta::View v(call);
    delta_step(v.q(), v.k(), v.v(), v.beta(), at::Tensor(), v.state(), v.o(), v.new_state());
  }
};

class GatedDeltaNetDecodeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gated::View v(call);
    delta_step(v.q(), v.k(), v.v(), v.beta(), v.g(), v.state(), v.o(), v.new_state());
  }
};

class GlaDecodeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gla::View v(call);
    const at::Tensor next = gla_token(v.state().to(at::kFloat), v.k(), v.v(), v.gk());
    v.o().copy_(read_out(next, v.q().to(at::kFloat)).mul_(gla_scale(v.scale(), v.q().size(2))));
    v.new_state().copy_(next);
  }
};

class GatedDeltaNetPrefillBthdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gdn_bthd::View v(call);  // [B, S, H, D]: tokens along dim 1
    gated_delta_sequence(v.q(), v.k(), v.v(), v.g(), v.beta(), 1, v.o(), v.final_state());
  }
};

class GatedDeltaNetPrefillBhtdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gdn_bhtd::View v(call);  // [B, H, S, D]: tokens along dim 2
    gated_delta_sequence(v.q(), v.k(), v.v(), v.g(), v.beta(), 2, v.o(), v.final_state());
  }
};

class GlaSequenceReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gla_seq::View v(call);  // [B, S, H, D]
    at::Tensor o = v.o(), final_state = v.final_state();
    at::Tensor s = v.initial_state() ? v.initial_state()->clone() : at::zeros(final_state.sizes(), final_state.options());
    const double scale = gla_scale(v.scale(), v.q().size(3));
    for (int64_t t = 0; t < v.q().size(1); ++t) {
      s = gla_token(s, v.k().select(1, t), v.v().select(1, t), v.g().select(1, t));
      o.select(1, t).copy_(read_out(s, v.q().select(1, t).to(at::kFloat)).mul_(scale));
    }
    final_state.copy_(s);
  }
};

KernelBuilder delta_builder() { return stateless_builder<DeltaNetDecodeReference>("delta_net_decode_fwd (ATen)"); }
KernelBuilder gated_builder() {
  return stateless_builder<GatedDeltaNetDecodeReference>("gated_delta_net_decode_fwd (ATen)");
}
KernelBuilder gla_builder() { return stateless_builder<GlaDecodeReference>("gla_decode_fwd (ATen)"); }
KernelBuilder gdn_bthd_builder() {
  return stateless_builder<GatedDeltaNetPrefillBthdReference>("gated_delta_net_prefill_bthd_fwd (ATen)");
}
KernelBuilder gdn_bhtd_builder() {
  return stateless_builder<GatedDeltaNetPrefillBhtdReference>("gated_delta_net_prefill_bhtd_fwd (ATen)");
}
KernelBuilder gla_seq_builder() { return stateless_builder<GlaSequenceReference>("gla_fwd (ATen)"); }

}  // namespace

TILEOPS_BUILTIN_KERNEL(reference, DeltaNetDecodeFwdOp, delta_builder);
TILEOPS_BUILTIN_KERNEL(reference, GatedDeltaNetDecodeFwdOp, gated_builder);
TILEOPS_BUILTIN_KERNEL(reference, GLADecodeFwdOp, gla_builder);
TILEOPS_BUILTIN_KERNEL(reference, GatedDeltaNetPrefillBTHDFwdOp, gdn_bthd_builder);
TILEOPS_BUILTIN_KERNEL(reference, GatedDeltaNetPrefillBHTDFwdOp, gdn_bhtd_builder);
TILEOPS_BUILTIN_KERNEL(reference, GLAFwdOp, gla_seq_builder);

}  // namespace tileops::reference

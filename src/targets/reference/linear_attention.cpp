// Linear attention on the reference target (DeltaNet, Gated DeltaNet, GLA): one token per (batch,
// head) in float32 ATen, a decode step or a sequence's tokens one after another: the oracle for
// kernels to come, and what serves CUDA tensors meanwhile. A decode step reads the state and writes
// new_state, the op's fresh output. The chunked training entries add what their backward reads (the
// states at chunk starts and the chunks' WY matrices, from their definitions), and the backward ops
// run the token recurrence in reverse from those states, exactly (no chunked algebra).
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/linalg_solve_triangular.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <vector>

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
namespace gdn_train_bhtd = tileops::ops::linear_attention_gated_delta_net_bhtd_fwd;
namespace gdn_train_bthd = tileops::ops::linear_attention_gated_delta_net_bthd_fwd;
namespace gdn_grad = tileops::ops::linear_attention_gated_delta_net_bwd;
namespace dn_train = tileops::ops::linear_attention_delta_net_fwd;
namespace dn_grad = tileops::ops::linear_attention_delta_net_bwd;
namespace gla_grad = tileops::ops::linear_attention_gla_bwd;

// sum_k state[..., k, :] * vec[..., k]: [B, H, DK, DV] x [B, H, DK] -> [B, H, DV].
at::Tensor read_out(const at::Tensor& state, const at::Tensor& vec) {
  return at::matmul(vec.unsqueeze(-2), state).squeeze(-2);
}

// sum_v state[..., :, v] * vec[..., v]: [B, H, DK, DV] x [B, H, DV] -> [B, H, DK].
at::Tensor read_in(const at::Tensor& state, const at::Tensor& vec) {
  return at::matmul(state, vec.unsqueeze(-1)).squeeze(-1);
}

// a[..., k] b[..., v]: [B, H, DK] x [B, H, DV] -> [B, H, DK, DV].
at::Tensor kv_outer(const at::Tensor& a, const at::Tensor& b) { return a.unsqueeze(-1) * b.unsqueeze(-2); }

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
// have it at the same place) through the (gated: g defined) delta rule from a zero state. o[t] is
// written; `states` [B, H, S / chunk + 1, DK, DV], when given, gets the state after every chunk of
// `chunk` tokens (states[:, :, 0] = 0). Returns the final state, float32.
at::Tensor delta_sequence(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                          const at::Tensor& beta, int64_t time, at::Tensor o, int64_t chunk = 0,
                          at::Tensor states = at::Tensor()) {
  const at::Tensor k0 = k.select(time, 0);  // [B, H, DK]
  at::Tensor s = at::zeros({k0.size(0), k0.size(1), k0.size(2), v.size(3)}, q.options().dtype(at::kFloat));
  for (int64_t t = 0; t < q.size(time); ++t) {
    if (states.defined() && t % chunk == 0) states.select(2, t / chunk).copy_(s);
    s = delta_token(s, k.select(time, t), v.select(time, t), beta.select(time, t),
                    g.defined() ? g.select(time, t) : at::Tensor());
    o.select(time, t).copy_(read_out(s, q.select(time, t).to(at::kFloat)));
  }
  if (states.defined()) states.select(2, states.size(2) - 1).copy_(s);
  return s;
}

// The WY matrix of every chunk, from its definition, in float32: k [B, H, S, DK], beta and the
// log-decay g [B, H, S] (g undefined: DeltaNet, no decay) -> A [B, H, NC, C, C] with
//   A = (I + strict_lower(diag(beta) (Gamma * K K^T)))^-1, Gamma[i, j] = exp(G[i] - G[j]),
// G the chunk-local inclusive prefix sum of g. Unit lower triangular; solved, not iterated.
at::Tensor wy_matrix(const at::Tensor& k, const at::Tensor& beta, const at::Tensor& g, int64_t chunk) {
  const int64_t nc = k.size(2) / chunk;
  const at::Tensor kc = k.to(at::kFloat).unflatten(2, {nc, chunk});  // [B, H, NC, C, DK]
  at::Tensor m = at::matmul(kc, kc.transpose(-1, -2)) * beta.to(at::kFloat).unflatten(2, {nc, chunk}).unsqueeze(-1);
  if (g.defined()) {
    const at::Tensor cum = g.to(at::kFloat).unflatten(2, {nc, chunk}).cumsum(-1);  // G [B, H, NC, C]
    // Gamma on and below the diagonal (G[i] - G[j] over j <= i); above it the exponent is masked to
    // 0 before exp so that no inf reaches the product, which strict_lower then drops.
    m = m * at::exp((cum.unsqueeze(-1) - cum.unsqueeze(-2)).tril());
  }
  const at::Tensor eye = at::eye(chunk, kc.options());
  const at::Tensor lhs = m.tril(-1) + eye;
  return at::linalg_solve_triangular(lhs, eye.expand(lhs.sizes()), /*upper=*/false, /*left=*/true,
                                     /*unitriangular=*/true);
}

// Per chunk: [B, H, NC, C, C] x rows [B, H, S, D] scaled by beta [B, H, S] -> A diag(beta) X [B, H, S, D].
at::Tensor wy_apply(const at::Tensor& a, const at::Tensor& x, const at::Tensor& beta) {
  const at::Tensor xb = x.to(at::kFloat) * beta.to(at::kFloat).unsqueeze(-1);
  return at::matmul(a, xb.unflatten(2, {a.size(2), a.size(3)})).flatten(2, 3);
}

// The states entering each token of chunk c, replayed from the chunk's entering state h[:, :, c]
// ([B, H, NC + 1, DK, DV]) with step(state, token): what a backward reverses token by token.
template <typename Step>
std::vector<at::Tensor> entering_states(const at::Tensor& h, int64_t c, int64_t chunk, Step step) {
  std::vector<at::Tensor> entering(chunk);
  at::Tensor s = h.select(2, c).to(at::kFloat);
  for (int64_t i = 0; i < chunk; ++i) {
    entering[i] = s;
    s = step(s, c * chunk + i);
  }
  return entering;
}

// The gradients of sum(o * dout) through the (gated: g defined) delta rule over [B, H, S, D] views,
// from the states entering each chunk (h [B, H, NC + 1, DK, DV]): per chunk from the last, its
// tokens' states are recomputed from h[:, :, c], then each token's step is reversed from the last,
// ds carrying the gradient of the state a token leaves (zero after the sequence: the final state
// takes no gradient). Each token's gradients are written once; dg only when g is defined.
void delta_backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& g, const at::Tensor& beta, const at::Tensor& h, int64_t chunk, at::Tensor dq,
                    at::Tensor dk, at::Tensor dv, at::Tensor dg, at::Tensor dbeta) {
  at::Tensor ds = at::zeros({q.size(0), q.size(1), q.size(3), v.size(3)}, q.options().dtype(at::kFloat));
  for (int64_t c = q.size(2) / chunk - 1; c >= 0; --c) {
    const std::vector<at::Tensor> entering = entering_states(h, c, chunk, [&](const at::Tensor& s, int64_t t) {
      return delta_token(s, k.select(2, t), v.select(2, t), beta.select(2, t), g.defined() ? g.select(2, t) : at::Tensor());
    });
    for (int64_t i = chunk - 1; i >= 0; --i) {
      const int64_t t = c * chunk + i;
      const at::Tensor qt = q.select(2, t).to(at::kFloat), kt = k.select(2, t).to(at::kFloat);
      const at::Tensor vt = v.select(2, t).to(at::kFloat), dot = dout.select(2, t).to(at::kFloat);
      const at::Tensor bt = beta.select(2, t).to(at::kFloat).unsqueeze(-1);  // [B, H, 1]
      const at::Tensor a = g.defined() ? at::exp(g.select(2, t).to(at::kFloat)).unsqueeze(-1).unsqueeze(-1)
                                       : at::Tensor();                     // [B, H, 1, 1]
      // Forward of the token: decayed = a s, resid = v - decayed^T k, v_new = beta resid,
      // left = decayed + k v_new^T, o = left^T q.
      const at::Tensor decayed = a.defined() ? entering[i] * a : entering[i];
      const at::Tensor resid = vt - read_out(decayed, kt);
      const at::Tensor v_new = bt * resid;
      const at::Tensor left = decayed + kv_outer(kt, v_new);
      ds = ds + kv_outer(qt, dot);                                // through o = left^T q
      dq.select(2, t).copy_(read_in(left, dot));
      const at::Tensor dv_new = read_out(ds, kt);                 // through left = ... + k v_new^T
      const at::Tensor dread = -bt * dv_new;                      // through v_new = beta (v - decayed^T k)
      dk.select(2, t).copy_(read_in(ds, v_new) + read_in(decayed, dread));
      dv.select(2, t).copy_(bt * dv_new);
      dbeta.select(2, t).copy_((dv_new * resid).sum(-1));
      const at::Tensor ddecayed = ds + kv_outer(kt, dread);
      if (a.defined()) {                                          // through decayed = exp(g) s
        dg.select(2, t).copy_((ddecayed * decayed).sum(-1).sum(-1));
        ds = ddecayed * a;
      } else {
        ds = ddecayed;
      }
    }
  }
}

// The gradients of sum(o * dout) + sum(final * dht) through GLA over [B, H, S, D] views (g per key),
// from the states entering each chunk (h [B, H, NC + 1, DK, DV]); o = scale * state^T q. As
// delta_backward: per chunk from the last, recompute its tokens' states, reverse each step.
void gla_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                  const at::Tensor& h, const at::Tensor& dout, const at::Tensor& dht, double scale, int64_t chunk,
                  at::Tensor dq, at::Tensor dk, at::Tensor dv, at::Tensor dg) {
  at::Tensor ds = dht.to(at::kFloat);
  for (int64_t c = q.size(2) / chunk - 1; c >= 0; --c) {
    const std::vector<at::Tensor> entering = entering_states(h, c, chunk, [&](const at::Tensor& s, int64_t t) {
      return gla_token(s, k.select(2, t), v.select(2, t), g.select(2, t));
    });
    for (int64_t i = chunk - 1; i >= 0; --i) {
      const int64_t t = c * chunk + i;
      const at::Tensor qt = q.select(2, t).to(at::kFloat), kt = k.select(2, t).to(at::kFloat);
      const at::Tensor vt = v.select(2, t).to(at::kFloat), dot = dout.select(2, t).to(at::kFloat);
      const at::Tensor decay = at::exp(g.select(2, t).to(at::kFloat));   // [B, H, DK]
      const at::Tensor left = gla_token(entering[i], kt, vt, g.select(2, t));
      ds = ds + kv_outer(qt, dot) * scale;                        // through o = scale * left^T q
      dq.select(2, t).copy_(read_in(left, dot) * scale);
      dk.select(2, t).copy_(read_in(ds, vt));                     // through left = ... + k v^T
      dv.select(2, t).copy_(read_out(ds, kt));
      dg.select(2, t).copy_(decay * (ds * entering[i]).sum(-1));  // through left = exp(g) s + ...
      ds = ds * decay.unsqueeze(-1);
    }
  }
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
    v.final_state().copy_(delta_sequence(v.q(), v.k(), v.v(), v.g(), v.beta(), 1, v.o()));
  }
};

class GatedDeltaNetPrefillBhtdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gdn_bhtd::View v(call);  // [B, H, S, D]: tokens along dim 2
    v.final_state().copy_(delta_sequence(v.q(), v.k(), v.v(), v.g(), v.beta(), 2, v.o()));
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

// GatedDeltaNetBHTDFwdOp / GatedDeltaNetBTHDFwdOp: o and the chunk states by the token recurrence
// (the prefill's, bit for bit), aw = au = the chunks' WY matrices. `time` is 2 (BHTD) or 1 (BTHD);
// transpose(1, 2) views the token-major tensors head-major for the WY matrices.
template <class View>
void gated_train_forward(const View& v, int64_t time) {
  const int64_t chunk = v.chunk_size();
  delta_sequence(v.q(), v.k(), v.v(), v.g(), v.beta(), time, v.o(), chunk, v.h());
  const auto head_major = [time](const at::Tensor& x) { return time == 2 ? x : x.transpose(1, 2); };
  const at::Tensor a = wy_matrix(head_major(v.k()), head_major(v.beta()), head_major(v.g()), chunk).flatten(2, 3);
  head_major(v.aw()).copy_(a);
  head_major(v.au()).copy_(a);
}

class GatedDeltaNetBhtdTrainReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override { gated_train_forward(gdn_train_bhtd::View(call), 2); }
};

class GatedDeltaNetBthdTrainReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override { gated_train_forward(gdn_train_bthd::View(call), 1); }
};

class GatedDeltaNetBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gdn_grad::View v(call);  // [B, H, S, D]
    delta_backward(v.dout(), v.q(), v.k(), v.v(), v.g(), v.beta(), v.h(), v.chunk_size(), v.dq(), v.dk(), v.dv(),
                   v.dg(), v.dbeta());
  }
};

class DeltaNetFwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const dn_train::View v(call);  // [B, H, S, D]
    const int64_t chunk = v.chunk_size();
    delta_sequence(v.q(), v.k(), v.v(), at::Tensor(), v.beta(), 2, v.o(), chunk, v.h());
    const at::Tensor a = wy_matrix(v.k(), v.beta(), at::Tensor(), chunk);
    v.aw().copy_(a.flatten(2, 3));
    v.au().copy_(a.flatten(2, 3));
    v.w().copy_(wy_apply(a, v.k(), v.beta()));
    v.u().copy_(wy_apply(a, v.v(), v.beta()));
  }
};

class DeltaNetBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const dn_grad::View v(call);  // [B, H, S, D]; aw, au, w, u are not read (recomputable from k, v, beta)
    delta_backward(v.dout(), v.q(), v.k(), v.v(), at::Tensor(), v.beta(), v.h(), v.chunk_size(), v.dq(), v.dk(),
                   v.dv(), at::Tensor(), v.dbeta());
  }
};

class GlaBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gla_grad::View v(call);  // [B, S, H, D], h [B, NC + 1, H, DK, DV]: viewed head-major
    const auto hm = [](const at::Tensor& x) { return x.transpose(1, 2); };
    gla_backward(hm(v.q()), hm(v.k()), hm(v.v()), hm(v.g()), hm(v.h()), hm(v.dout()), v.dht(),
                 gla_scale(v.scale(), v.q().size(3)), v.chunk_size(), hm(v.dq()), hm(v.dk()), hm(v.dv()),
                 hm(v.dg()));
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
KernelBuilder gdn_train_bhtd_builder() {
  return stateless_builder<GatedDeltaNetBhtdTrainReference>("gated_delta_net_bhtd_fwd (ATen)");
}
KernelBuilder gdn_train_bthd_builder() {
  return stateless_builder<GatedDeltaNetBthdTrainReference>("gated_delta_net_bthd_fwd (ATen)");
}
KernelBuilder gdn_grad_builder() { return stateless_builder<GatedDeltaNetBwdReference>("gated_delta_net_bwd (ATen)"); }
KernelBuilder dn_train_builder() { return stateless_builder<DeltaNetFwdReference>("delta_net_fwd (ATen)"); }
KernelBuilder dn_grad_builder() { return stateless_builder<DeltaNetBwdReference>("delta_net_bwd (ATen)"); }
KernelBuilder gla_grad_builder() { return stateless_builder<GlaBwdReference>("gla_bwd (ATen)"); }

}  // namespace

TILEOPS_BUILTIN_KERNEL(reference, DeltaNetDecodeFwdOp, delta_builder);
TILEOPS_BUILTIN_KERNEL(reference, GatedDeltaNetDecodeFwdOp, gated_builder);
TILEOPS_BUILTIN_KERNEL(reference, GLADecodeFwdOp, gla_builder);
TILEOPS_BUILTIN_KERNEL(reference, GatedDeltaNetPrefillBTHDFwdOp, gdn_bthd_builder);
TILEOPS_BUILTIN_KERNEL(reference, GatedDeltaNetPrefillBHTDFwdOp, gdn_bhtd_builder);
TILEOPS_BUILTIN_KERNEL(reference, GLAFwdOp, gla_seq_builder);
TILEOPS_BUILTIN_KERNEL(reference, GatedDeltaNetBHTDFwdOp, gdn_train_bhtd_builder);
TILEOPS_BUILTIN_KERNEL(reference, GatedDeltaNetBTHDFwdOp, gdn_train_bthd_builder);
TILEOPS_BUILTIN_KERNEL(reference, GatedDeltaNetBwdOp, gdn_grad_builder);
TILEOPS_BUILTIN_KERNEL(reference, DeltaNetFwdOp, dn_train_builder);
TILEOPS_BUILTIN_KERNEL(reference, DeltaNetBwdOp, dn_grad_builder);
TILEOPS_BUILTIN_KERNEL(reference, GLABwdOp, gla_grad_builder);

}  // namespace tileops::reference

// Sequence-modeling ops on the reference target (manifests/sequence_modeling.yaml): Engram's gated
// causal convolution (forward, backward, one decode step), the complex FFT, mHC's pre and post
// mixing. Plain float32 ATen (the FFT: ATen's own, pocketfft on CPU, cuFFT on CUDA), each output
// rounded once: the oracle for kernels to come, and what serves CUDA tensors meanwhile.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/fft_fft.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/zeros_like.h>

#include <cmath>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace gate_fwd = tileops::ops::sequence_modeling_engram_gate_conv_fwd;
namespace gate_bwd = tileops::ops::sequence_modeling_engram_gate_conv_bwd;
namespace decode = tileops::ops::sequence_modeling_engram_decode_fwd;
namespace fft = tileops::ops::sequence_modeling_fftc2_c_fwd;
namespace mhc_pre = tileops::ops::sequence_modeling_mhc_pre_fwd;
namespace mhc_post = tileops::ops::sequence_modeling_mhc_post_fwd;

at::Tensor f32(const at::Tensor& t) { return t.to(at::kFloat); }

// rsqrt(mean over the last dim of x^2 + eps): [..., d] -> [...].
at::Tensor rrms(const at::Tensor& x, double eps) { return (x.square().mean(-1) + eps).rsqrt(); }

// [...] -> [..., 1], to scale rows of [..., d].
at::Tensor col(const at::Tensor& t) { return t.unsqueeze(-1); }

// Engram's causal depthwise convolution along dim 1 of u [m, T, d] with taps w [K, d]:
// c[t] = sum_p w[p] * u[t - (K - 1) + p], zero before t = 0 (w[K - 1] weighs position t).
at::Tensor causal_conv(const at::Tensor& u, const at::Tensor& w) {
  const int64_t taps = w.size(0), len = u.size(1);
  const at::Tensor padded = at::constant_pad_nd(u, {0, 0, taps - 1, 0});
  at::Tensor c = w.select(0, taps - 1) * u;
  for (int64_t p = 0; p + 1 < taps; ++p) c = c + w.select(0, p) * padded.narrow(1, p, len);
  return c;
}

// The RMS norm's backward through x -> x * r (r = rrms(x), read as given) for a gradient g of x * r:
// r g - x r^3 sum_d(g x) / d.
at::Tensor rms_backward(const at::Tensor& x, const at::Tensor& r, const at::Tensor& g) {
  const at::Tensor inner = (g * x).sum(-1);
  const double d = static_cast<double>(x.size(-1));
  return col(r) * g - x * col(r.pow(3) * inner / d);
}

class GateConvFwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gate_fwd::View v(call);
    const double eps = v.eps();
    const at::Tensor h = f32(v.h()), k = f32(v.k()), x_v = f32(v.v()), wh = f32(v.rms_w_h());
    const at::Tensor rh = rrms(h, eps), rk = rrms(k, eps);  // [m, T]
    const at::Tensor alpha =
        ((h * col(rh) * wh * k * col(rk) * wh).sum(-1) / std::sqrt(static_cast<double>(v.d()))).sigmoid();
    const at::Tensor vhat = col(alpha) * x_v;
    const at::Tensor rv = rrms(vhat, eps);
    const at::Tensor c = causal_conv(vhat * col(rv) * f32(v.rms_w_v()), f32(v.conv_w()));
    v.y().copy_(at::silu(c) + vhat);
    v.vhat().copy_(vhat);
    v.alpha().copy_(alpha);
    v.rrms_h().copy_(rh);
    v.rrms_k().copy_(rk);
    v.rrms_v().copy_(rv);
  }
};

class GateConvBwdReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gate_bwd::View v(call);
    const at::Tensor dy = f32(v.dy()), h = f32(v.h()), k = f32(v.k()), x_v = f32(v.v());
    const at::Tensor wh = f32(v.rms_w_h()), wv = f32(v.rms_w_v()), cw = f32(v.conv_w());
    const at::Tensor vhat = f32(v.vhat()), alpha = v.alpha(), rh = v.rrms_h(), rk = v.rrms_k(), rv = v.rrms_v();
    const int64_t taps = cw.size(0), len = vhat.size(1);
    // y = silu(c) + vhat, c = conv(u), u = vhat * rv * wv.
    const at::Tensor vn = vhat * col(rv);
    const at::Tensor u = vn * wv;
    const at::Tensor c = causal_conv(u, cw);
    const at::Tensor sig = c.sigmoid();
    const at::Tensor gc = dy * sig * (1.0 + c * (1.0 - sig));
    const at::Tensor u_pad = at::constant_pad_nd(u, {0, 0, taps - 1, 0});
    const at::Tensor gc_pad = at::constant_pad_nd(gc, {0, 0, 0, taps - 1});
    at::Tensor gu = at::zeros_like(u);
    for (int64_t p = 0; p < taps; ++p) {
      v.dconv_w().select(0, p).copy_((gc * u_pad.narrow(1, p, len)).sum(at::IntArrayRef{0, 1}));
      gu = gu + cw.select(0, p) * gc_pad.narrow(1, taps - 1 - p, len);
    }
    v.drms_w_v().copy_((gu * vn).sum(at::IntArrayRef{0, 1}));
    const at::Tensor gvhat = dy + rms_backward(vhat, rv, gu * wv);
    v.dv().copy_(col(alpha) * gvhat);
    // alpha = sigmoid(s), s = sum_d hn * kn / sqrt(d), hn = h * rh * wh, kn = k * rk * wh.
    const at::Tensor galpha = (gvhat * x_v).sum(-1);
    const at::Tensor gs = col(galpha * alpha * (1.0 - alpha) / std::sqrt(static_cast<double>(v.d())));
    const at::Tensor hh = h * col(rh), kh = k * col(rk);
    const at::Tensor g_hn = gs * kh * wh, g_kn = gs * hh * wh;
    v.drms_w_h().copy_((g_hn * hh + g_kn * kh).sum(at::IntArrayRef{0, 1}));
    v.dh().copy_(rms_backward(h, rh, g_hn * wh));
    v.dk().copy_(rms_backward(k, rk, g_kn * wh));
  }
};

class DecodeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const decode::View v(call);
    const double eps = v.eps();
    const int64_t taps = v.conv_kernel_size(), dilation = v.dilation(), cache = v.max_conv_len();
    const at::Tensor e = f32(v.e_t());
    const at::Tensor k = e.matmul(f32(v.w_k())), x_v = e.matmul(f32(v.w_v()));  // [batch, d]
    const at::Tensor h = f32(v.h_t()), wh = f32(v.rms_w_h()), cw = f32(v.conv_w());
    const at::Tensor alpha = ((h * col(rrms(h, eps)) * wh * k * col(rrms(k, eps)) * wh).sum(-1) /
                              std::sqrt(static_cast<double>(v.d())))
                                 .sigmoid();
    const at::Tensor vhat = col(alpha) * x_v;
    const at::Tensor u = vhat * col(rrms(vhat, eps)) * f32(v.rms_w_v());
    // The cache as max_conv_len rows, the missing oldest ones zero; row cache - j is j steps ago.
    const at::Tensor state = at::constant_pad_nd(v.conv_state(), {0, 0, cache - v.conv_state().size(1), 0});
    at::Tensor c = cw.select(0, taps - 1) * u;
    for (int64_t p = 0; p + 1 < taps; ++p) c = c + cw.select(0, p) * f32(state.select(1, cache - (taps - 1 - p) * dilation));
    v.y_t().copy_(at::silu(c) + vhat);
    if (cache > 0) v.new_conv_state().copy_(at::cat({state.narrow(1, 1, cache - 1), u.unsqueeze(1).to(state.scalar_type())}, 1));
  }
};

class FFTReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const fft::View v(call);
    v.output().copy_(at::fft_fft(v.input()));
  }
};

class MHCPreReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const mhc_pre::View v(call);
    const int64_t n = v.n_expand();
    const at::Tensor x = f32(v.x());  // [batch, D]
    const int64_t batch = x.size(0), width = x.size(1);
    const at::Tensor b = v.b();
    const at::Tensor r = x.square().sum(-1).sqrt() / std::sqrt(static_cast<double>(width)) + 1e-4;
    const at::Tensor hc = x.matmul(v.phi()) / col(r);  // [batch, n * n + 2 * n]
    const at::Tensor pre = (v.alpha_pre() * hc.narrow(1, 0, n) + b.narrow(0, 0, n)).sigmoid();
    v.h_post().copy_(2.0 * (v.alpha_post() * hc.narrow(1, n, n) + b.narrow(0, n, n)).sigmoid());
    at::Tensor res = (v.alpha_res() * hc.narrow(1, 2 * n, n * n) + b.narrow(0, 2 * n, n * n)).reshape({batch, n, n});
    res = (res - res.amax(-1, /*keepdim=*/true)).exp();
    const double eps = v.sinkhorn_eps();
    for (int64_t i = 0; i < v.sinkhorn_repeat(); ++i) {
      res = res / (res.sum(-1, /*keepdim=*/true) + eps);
      res = res / (res.sum(-2, /*keepdim=*/true) + eps);
    }
    const at::Tensor streams = x.reshape({batch, n, width / n});
    v.x_layer().copy_(pre.unsqueeze(1).matmul(streams).squeeze(1));
    v.x_res().copy_(res.matmul(streams).reshape({batch, width}));
  }
};

class MHCPostReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const mhc_post::View v(call);
    const at::Tensor layer = f32(v.x_layer_out());  // [batch, c_x]
    const int64_t batch = layer.size(0), n = v.h_post().size(1), width = layer.size(1);
    const at::Tensor spread = col(v.h_post()) * layer.unsqueeze(1);  // [batch, n, c_x]
    v.x_out().copy_((spread + f32(v.x_res()).reshape({batch, n, width})).reshape({batch, n * width}));
  }
};

KernelBuilder gate_fwd_builder() { return stateless_builder<GateConvFwdReference>("engram_gate_conv_fwd (ATen)"); }
KernelBuilder gate_bwd_builder() { return stateless_builder<GateConvBwdReference>("engram_gate_conv_bwd (ATen)"); }
KernelBuilder decode_builder() { return stateless_builder<DecodeReference>("engram_decode_fwd (ATen)"); }
KernelBuilder fft_builder() { return stateless_builder<FFTReference>("fft_c2c_fwd (ATen fft_fft)"); }
KernelBuilder mhc_pre_builder() { return stateless_builder<MHCPreReference>("mhc_pre_fwd (ATen)"); }
KernelBuilder mhc_post_builder() { return stateless_builder<MHCPostReference>("mhc_post_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, EngramGateConvFwdOp, gate_fwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, EngramGateConvBwdOp, gate_bwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, EngramDecodeFwdOp, decode_builder);
TILEOPS_BUILTIN_KERNEL(reference, FFTC2CFwdOp, fft_builder);
TILEOPS_BUILTIN_KERNEL(reference, MHCPreFwdOp, mhc_pre_builder);
TILEOPS_BUILTIN_KERNEL(reference, MHCPostFwdOp, mhc_post_builder);

}  // namespace
}  // namespace tileops::reference

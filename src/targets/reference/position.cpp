// The position family (manifests/position.yaml) on the reference target: each op's ref_api with
// ATen, the oracle of the nvrtc position kernels.

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <optional>
#include <string_view>

#include "targets/builtin.h"
#include "targets/position_rope_cached_args.h"
#include "targets/reference/position.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {

// TileOPs' RoPE entries over x (RopeNeoxFwdOp, RopeNonNeoxFwdOp, RopeLlama31FwdOp, RopeYarnFwdOp,
// RopeLongRopeFwdOp) on the reference target: each builds its frequencies f[half] in float32 from its
// params (TileOPs' formulas, step by step) and an amplitude; one rotation serves all: the token at
// index p of x's sequence axis (dim 0 for layout '1d', dim 1 for '2d') takes cos(p*f) and sin(p*f),
// float32 angles and cos/sin times the amplitude, rounded to x's dtype (TileOPs' table), then Neox
// halves (RopeNonNeoxFwdOp: adjacent pairs) in float32, rounded once.
namespace {

namespace neox = tileops::ops::position_rope_neox_fwd;
namespace non_neox = tileops::ops::position_rope_non_neox_fwd;
namespace llama31 = tileops::ops::position_rope_llama31_fwd;
namespace yarn = tileops::ops::position_rope_yarn_fwd;
namespace longrope = tileops::ops::position_rope_long_rope_fwd;
constexpr double kTwoPi = 6.283185307179586;

// What the rotation needs from an entry: its frequencies (float32 [half]) and the factor cos and
// sin are multiplied by before they are rounded (1: none).
struct Frequencies {
  at::Tensor f;
  double amplitude = 1.0;
};

// i / half for i < half, in float32 (the exponent of every entry's base).
at::Tensor exponents(int64_t half, const at::TensorOptions& f32) {
  return at::arange(half, f32) / static_cast<double>(half);
}

// base_freqs: f_i = base^(-i/half), the other entries' starting point.
template <class V>
  requires std::same_as<V, neox::View> || std::same_as<V, non_neox::View>
Frequencies frequencies(const V& v, int64_t half, const at::TensorOptions& f32) {
  return {at::pow(v.base(), exponents(half, f32)).reciprocal(), 1.0};
}

Frequencies frequencies(const llama31::View& v, int64_t half, const at::TensorOptions& f32) {
  const at::Tensor f = at::pow(v.base(), exponents(half, f32)).reciprocal();
  // The bands are decided in double from the float32 frequencies, as TileOPs reads each one back.
  const double L = static_cast<double>(v.original_max_position());
  const double lo = v.low_freq_factor(), hi = v.high_freq_factor(), scale = v.scale_factor();
  const at::Tensor wavelen = kTwoPi / f.to(at::kDouble);
  const at::Tensor smooth = (L / wavelen - lo) / (hi - lo);  // double; used in the middle band only
  // ((1 - s) * f) / scale + s * f, each product and quotient in float32.
  const at::Tensor blended = (1.0 - smooth).to(at::kFloat) * f / scale + smooth.to(at::kFloat) * f;
  const at::Tensor scaled = at::where(wavelen > L / lo, f / scale, blended);
  return {at::where(wavelen < L / hi, f, scaled), 1.0};
}

// The correction dim of r rotations over original_max_position (counted over half dims, as TileOPs).
double yarn_correction_dim(double rotations, int64_t half, double base, int64_t original_max_position) {
  return static_cast<double>(half) * std::log(static_cast<double>(original_max_position) / (rotations * kTwoPi)) /
         (2.0 * std::log(base));
}

Frequencies frequencies(const yarn::View& v, int64_t half, const at::TensorOptions& f32) {
  const at::Tensor e = exponents(half, f32);
  const at::Tensor extrapolated = at::pow(v.base(), e).reciprocal();
  const at::Tensor interpolated = at::pow(v.scale() * v.base(), e).reciprocal();  // the scale on the base
  const double low = std::max(std::floor(yarn_correction_dim(v.beta_fast(), half, v.base(), v.original_max_position())), 0.0);
  double high = std::min(std::ceil(yarn_correction_dim(v.beta_slow(), half, v.base(), v.original_max_position())),
                         static_cast<double>(half - 1));
  if (low == high) high += 1.0;
  const at::Tensor ramp = at::clamp((at::arange(half, f32) - low) / (high - low), 0.0, 1.0);
  const at::Tensor keep = 1.0 - ramp;  // 1: the extrapolated frequency (low dims), 0: interpolated
  return {interpolated * (1.0 - keep) + extrapolated * keep, v.attn_factor()};
}

Frequencies frequencies(const longrope::View& v, int64_t half, const at::TensorOptions& f32) {
  at::Tensor divisor = at::pow(v.base(), exponents(half, f32));
  if (const at::Tensor* r = v.rescale_factors()) divisor = *r * divisor;  // float32 [half] (the manifest)
  const double s = static_cast<double>(v.max_position_embeddings()) / v.original_max_position_embeddings();
  const double amplitude =
      s > 1.0 ? std::sqrt(1.0 + std::log(s) / std::log(static_cast<double>(v.original_max_position_embeddings()))) : 1.0;
  return {divisor.reciprocal(), amplitude};
}

// x rotated into out; `layout` names x's rank (the manifest's rules tie them: 2 dims for '1d', 4 for
// '2d'); `pairs`: frequency i turns (x[2i], x[2i+1]), else (x[i], x[i + half]).
void rotate(std::string_view layout, const at::Tensor& x, at::Tensor out, const Frequencies& fr, bool pairs) {
  const int64_t seq_dim = layout == "1d" ? 0 : 1;
  const int64_t half = x.size(-1) / 2, seq_len = x.size(seq_dim);
  const auto f32 = x.options().dtype(at::kFloat);
  const at::Tensor angles = at::arange(seq_len, f32).unsqueeze(1) * fr.f.unsqueeze(0);  // [seq_len, half], float32
  // TileOPs' table: cos/sin in float32 times the amplitude, rounded to x's dtype (widened exactly).
  at::Tensor cos = (angles.cos() * fr.amplitude).to(x.scalar_type()).to(at::kFloat);
  at::Tensor sin = (angles.sin() * fr.amplitude).to(x.scalar_type()).to(at::kFloat);
  if (layout != "1d") {  // [1, seq_len, 1, half]: shared by batches and heads
    cos = cos.unsqueeze(0).unsqueeze(2);
    sin = sin.unsqueeze(0).unsqueeze(2);
  }
  if (pairs) {
    // x[..., 2i] and x[..., 2i+1] are the two halves of pair i; the rotated pairs interleave back.
    const at::Tensor x1 = x.slice(-1, 0, 2 * half, 2).to(at::kFloat), x2 = x.slice(-1, 1, 2 * half, 2).to(at::kFloat);
    out.copy_(at::stack({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1).flatten(-2));
    return;
  }
  const at::Tensor x1 = x.narrow(-1, 0, half).to(at::kFloat), x2 = x.narrow(-1, half, half).to(at::kFloat);
  out.narrow(-1, 0, half).copy_(x1 * cos - x2 * sin);
  out.narrow(-1, half, half).copy_(x2 * cos + x1 * sin);
}

template <class V, bool kPairs = false>
class RopeReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const V v(call);
    const at::Tensor& x = v.x();
    const int64_t half = x.size(-1) / 2;
    rotate(v.layout(), x, v.output(), frequencies(v, half, x.options().dtype(at::kFloat)), kPairs);
  }
};

KernelBuilder rope_neox_builder() { return stateless_builder<RopeReference<neox::View>>("rope_neox_fwd (ATen)"); }
KernelBuilder rope_non_neox_builder() {
  return stateless_builder<RopeReference<non_neox::View, true>>("rope_non_neox_fwd (ATen)");
}
KernelBuilder rope_llama31_builder() {
  return stateless_builder<RopeReference<llama31::View>>("rope_llama31_fwd (ATen)");
}
KernelBuilder rope_yarn_builder() { return stateless_builder<RopeReference<yarn::View>>("rope_yarn_fwd (ATen)"); }
KernelBuilder rope_long_rope_builder() {
  return stateless_builder<RopeReference<longrope::View>>("rope_long_rope_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, RopeNeoxFwdOp, rope_neox_builder);
TILEOPS_BUILTIN_KERNEL(reference, RopeNonNeoxFwdOp, rope_non_neox_builder);
TILEOPS_BUILTIN_KERNEL(reference, RopeLlama31FwdOp, rope_llama31_builder);
TILEOPS_BUILTIN_KERNEL(reference, RopeYarnFwdOp, rope_yarn_builder);
TILEOPS_BUILTIN_KERNEL(reference, RopeLongRopeFwdOp, rope_long_rope_builder);

}  // namespace

// RopeNeoxPositionIdsFwdOp on the reference target: TileOPs' table (float32 angles and cos/sin,
// rounded to x's dtype) gathered at the positions, the Neox rotation in float32, rounded once
// (position.h, shared with the attention ops that fuse it).
namespace {

namespace rope_neox_position_ids_fwd = tileops::ops::position_rope_neox_position_ids_fwd;

class RopePositionIdsReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const rope_neox_position_ids_fwd::View v(call);
    const at::Tensor& x = v.x();
    at::Tensor out = v.output();
    const int64_t head_dim = x.size(2), rot = v.rotary_dim().value_or(head_dim);
    const at::Tensor positions = v.position_ids().to(at::kLong);
    if (positions.numel() > 0) {  // data, which no shape rule can state: 0 <= position_ids < max_position
      refuse_host_read_during_capture(call.op_name, "position_ids", positions);
      const int64_t lo = positions.min().item<int64_t>(), hi = positions.max().item<int64_t>();
      TORCH_CHECK_VALUE(lo >= 0 && hi < v.max_position(), call.op_name, ": 'position_ids' must lie in [0, ",
                        v.max_position(), ") (max_position), got ", lo < 0 ? lo : hi);
    }
    out.copy_(rope_neox_float(x, positions, v.base(), rot, x.scalar_type()));
  }
};

KernelBuilder rope_position_ids_builder() {
  return stateless_builder<RopePositionIdsReference>("rope_neox_position_ids_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, RopeNeoxPositionIdsFwdOp, rope_position_ids_builder);

}  // namespace

// RopeNeoxCachedFwdOp, RopeNonNeoxCachedFwdOp and their flat forms on the reference target: the vLLM formula
// written out with ATen ops (no torch function exists), in float32, rounded once; the correctness
// oracle. The cache may be float16/bfloat16 (q's dtype, dtype_combos): its values are widened to
// float32 exactly. Positions are int64 or int32; the flat forms view q and k as [t, heads, head_size]
// and add the optional per-token offsets to the positions; an absent key is skipped.
namespace {

namespace rope_cached_fwd = rope_cached_args::op;
namespace flat = rope_cached_args::flat;
// Each style's entries are read through the Neox entry's view.
using RopeView = rope_cached_fwd::View;
using FlatView = flat::View;

template <bool kNeox, bool kFlat>
class RopeCachedReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    // The 3-D form's tensors, or the flat form's viewed as [t, heads, head_size] plus its offsets.
    const at::Tensor* offsets = nullptr;
    std::optional<int64_t> head_size;
    const at::Tensor *positions_in, *cache_in, *q, *k;
    if constexpr (kFlat) {
      const FlatView v(call);
      positions_in = &v.positions(), cache_in = &v.cos_sin_cache(), q = &v.q(), k = v.k();
      offsets = v.offsets(), head_size = v.head_size();
    } else {
      const RopeView v(call);
      positions_in = &v.positions(), cache_in = &v.cos_sin_cache(), q = &v.q(), k = v.k();
    }
    at::Tensor positions = positions_in->to(at::kLong);
    if (offsets) positions = positions + *offsets;
    const at::Tensor& cache = *cache_in;
    const int64_t max_pos = cache.size(0), rot = cache.size(1), half = rot / 2;
    if (positions.numel() > 0) {
      // The manifest's rule for data (no shape can say it): 0 <= positions < max_pos.
      refuse_host_read_during_capture(call.op_name, "positions", positions);
      const int64_t lo = positions.min().item<int64_t>(), hi = positions.max().item<int64_t>();
      const int64_t bad = lo < 0 ? lo : hi;
      TORCH_CHECK_INDEX(lo >= 0 && hi < max_pos, call.op_name, ": '", kFlat ? "positions + offsets" : "positions",
                        "' must satisfy 0 <= ", kFlat ? "positions + offsets" : "positions",
                        " < max_pos (max_pos=", max_pos, ", the rows of cos_sin_cache), got ", bad);
    }
    const at::Tensor cs = cache.index_select(0, positions).to(at::kFloat).unsqueeze(1);  // [t, 1, rot]
    const at::Tensor cos = cs.narrow(2, 0, half), sin = cs.narrow(2, half, half);
    for (const at::Tensor* qk : {q, k}) {
      if (qk == nullptr) continue;  // key=None
      at::Tensor heads = *qk;
      if (head_size) heads = heads.view({heads.size(0), heads.size(1) / *head_size, *head_size});
      const at::Tensor x = heads.narrow(2, 0, rot);  // a view: written in place below
      const at::Tensor xf = x.to(at::kFloat);
      at::Tensor y;
      if (kNeox) {
        const at::Tensor x1 = xf.narrow(2, 0, half), x2 = xf.narrow(2, half, half);
        y = at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, 2);
      } else {
        const at::Tensor x1 = xf.slice(2, 0, rot, 2), x2 = xf.slice(2, 1, rot, 2);
        y = at::stack({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1).flatten(2);
      }
      x.copy_(y);
    }
  }
};

KernelBuilder rope_neox_cached_builder() { return stateless_builder<RopeCachedReference<true, false>>("rope_neox_cached_fwd (ATen)"); }
KernelBuilder rope_non_neox_cached_builder() { return stateless_builder<RopeCachedReference<false, false>>("rope_gptj_cached_fwd (ATen)"); }
KernelBuilder rope_neox_cached_flat_builder() { return stateless_builder<RopeCachedReference<true, true>>("rope_neox_cached_fwd (ATen)"); }
KernelBuilder rope_non_neox_cached_flat_builder() {
  return stateless_builder<RopeCachedReference<false, true>>("rope_gptj_cached_fwd (ATen)");
}
TILEOPS_BUILTIN_KERNEL(reference, RopeNeoxCachedFwdOp, rope_neox_cached_builder);
TILEOPS_BUILTIN_KERNEL(reference, RopeNonNeoxCachedFwdOp, rope_non_neox_cached_builder);
TILEOPS_BUILTIN_KERNEL(reference, RopeNeoxCachedFlatFwdOp, rope_neox_cached_flat_builder);
TILEOPS_BUILTIN_KERNEL(reference, RopeNonNeoxCachedFlatFwdOp, rope_non_neox_cached_flat_builder);

}  // namespace

// SinusoidalFwdOp on the reference target: the formula in float64 with ATen ops, rounded once.
namespace {

namespace sinusoidal_fwd = tileops::ops::position_sinusoidal_fwd;

class SinusoidalReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const sinusoidal_fwd::View v(call);
    const int64_t n = v.num_positions(), dim = v.dim();
    const auto opts = at::TensorOptions().dtype(at::kDouble).device(call.device);
    const at::Tensor inv_freq = at::pow(v.base(), at::arange(0, dim, 2, opts) / -double(dim));
    const at::Tensor angle = at::arange(n, opts).unsqueeze(1) * inv_freq;  // [n, dim/2]
    // Interleaved: column 2i is sin, 2i+1 cos.
    v.table().copy_(at::stack({at::sin(angle), at::cos(angle)}, -1).view({n, dim}));
  }
};

KernelBuilder sinusoidal_builder() { return stateless_builder<SinusoidalReference>("sinusoidal (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, SinusoidalFwdOp, sinusoidal_builder);

}  // namespace

// AlibiFwdOp on the reference target: the formula with ATen ops (serves any device).
namespace {

namespace alibi_fwd = tileops::ops::position_alibi_fwd;

class AlibiReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const alibi_fwd::View v(call);
    const int64_t heads = v.num_heads();
    int64_t n = 1;
    while (n * 2 <= heads) n *= 2;
    const auto opts = at::TensorOptions().dtype(at::kDouble).device(call.device);
    at::Tensor first = at::pow(2.0, at::arange(1, n + 1, opts) * (-8.0 / n));
    at::Tensor slopes = first;
    if (heads > n) {
      at::Tensor extra = at::pow(2.0, (at::arange(0, heads - n, opts) * 2 + 1) * (-4.0 / n));
      slopes = at::cat({first, extra});
    }
    v.slopes().copy_(slopes);
  }
};

KernelBuilder alibi_builder() { return stateless_builder<AlibiReference>("alibi_slopes (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, AlibiFwdOp, alibi_builder);

}  // namespace

}  // namespace tileops::reference

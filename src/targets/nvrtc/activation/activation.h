// The activation family on the nvrtc target: ReluFwdOp, SiluFwdOp, GeluFwdOp, SigmoidFwdOp,
// QuickGeluFwdOp and the gated SiluAndMulFwdOp, GeluAndMulFwdOp, GeluTanhAndMulFwdOp, MulAndSiluFwdOp,
// FatreluAndMulFwdOp, SwigluOAIAndMulFwdOp (src/kernels/activation/{unary,gated}_fwd.cuh). The
// problem is the spec: sizes and the ops' float params are kernel arguments.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "kernels/common/op_ids.cuh"
#include "targets/nvrtc/nvrtc_target.h"

namespace tileops::nvrtc {

// The kernels' ids (kernels/common/op_ids.cuh); FatRelu and SwigluOai are gated only.
enum class Act : int {
  Relu = kActRelu, Silu = kActSilu, Gelu = kActGelu, GeluTanh = kActGeluTanh, Sigmoid = kActSigmoid,
  QuickGelu = kActQuickGelu, FatRelu = kActFatRelu, SwigluOai = kActSwigluOai
};
// Where a gated op's gate and up values sit in x's last dim.
enum class GateLayout : int { First = kGateFirst, Second = kGateSecond, Interleaved = kGateInterleaved };

struct ActivationSpec {
  c10::ScalarType dtype;  // x's
  Act act;
  bool gated;  // y = f(gate, up) over x's last dim (2 * d wide) instead of y = act(x)
  int vec;     // elements a thread step (one 16-byte access a side at most when x and y share a dtype)
  // y's dtype when it differs from x's (unary only: SigmoidFwdOp on integer x gives float32);
  // Undefined = x's dtype.
  c10::ScalarType out_dtype = c10::ScalarType::Undefined;
  GateLayout layout = GateLayout::First;  // gated only

  std::string arch;

  c10::ScalarType y_dtype() const { return out_dtype == c10::ScalarType::Undefined ? dtype : out_dtype; }
  // Gated ops other than [gate | up] with act(gate) * up take gated_layout_fwd and two float scalars.
  bool layout_kernel() const {
    return gated && (layout != GateLayout::First || act == Act::FatRelu || act == Act::SwigluOai);
  }
  int ctas_per_sm = 0;  // > 0: a launch's grid capped at this many CTAs an SM (tuning: act_ctas_per_sm)

  TILEOPS_IDENTITY(ActivationSpec, dtype, act, gated, vec, out_dtype, layout, arch, ctas_per_sm)
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};
// What a call asks for: the spec without the device. Read on every call: integers only.
struct ActivationProblem {
  c10::ScalarType dtype;
  Act act;
  bool gated;
  int vec;
  c10::ScalarType out_dtype = c10::ScalarType::Undefined;
  GateLayout layout = GateLayout::First;
  TILEOPS_IDENTITY(ActivationProblem, dtype, act, gated, vec, out_dtype, layout)
};

constexpr int kActivationThreads = 256;
constexpr int kActivationUnroll = 4;
// One trip of kActivationUnroll accesses a thread, as many CTAs as that takes (no grid cap): the
// capped, striding grid ran slower (docs/PERF.md, "Elementwise activations"). Tuning: act_ctas_per_sm.
// When that grid would leave SMs idle (a decode row), CTAs of kActivationSmallThreads instead, one
// access a thread, on up to `sms` of them: the loads spread over more SMs rather than queue four
// deep on a few.
constexpr int kActivationSmallThreads = 128;
struct ActivationLaunch {
  long long grid;
  int threads;
};
ActivationLaunch activation_launch(long long vecs, int sms, long long cap);

// Widest power-of-two access (in elements, <= 16 bytes) that every pointer's alignment and
// `divisor` (the gated row width d; 0 = no constraint) allow.
int activation_vec(c10::ScalarType dtype, int64_t divisor, std::initializer_list<const void*> ptrs);
// Unary ops, x and y of possibly different dtypes: the widest step (elements) for which x's loads
// and y's stores are each 16 bytes at most and aligned; with equal dtypes the same as above.
int unary_vec(c10::ScalarType x_dtype, c10::ScalarType y_dtype, const void* x, const void* y);
std::string activation_name(const ActivationSpec& p, const std::string& arch);
jit::KernelSource activation_source(const ActivationSpec& p, const std::string& arch);

}  // namespace tileops::nvrtc

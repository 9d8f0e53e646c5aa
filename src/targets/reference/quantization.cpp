// FP8QuantFwdOp on the reference target: the formula of TileOPs' kernel written with ATen, in float32.
// amax = max(absmax(row), 1e-4); scale = amax * (1 / 448); q = e4m3fn(clamp(x / scale, -448, 448)).
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/div.h>
#include <ATen/ops/full.h>
#include <ATen/ops/maximum.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace op = tileops::ops::quantization_fp8_quant_fwd;

class Fp8QuantReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const op::View v(call);
    const at::Tensor x = v.input_tensor().to(at::kFloat);
    // Float32 tensors for the constants, so that every operation rounds to float32 as the kernel does
    // (1e-4f and the float32 product 1 / 448, never a double). amax and clamp keep a NaN.
    const at::Tensor floor = at::full({}, 1e-4f, x.options());
    const at::Tensor inv_qmax = at::full({}, 1.f / 448.f, x.options());
    const at::Tensor amax = at::maximum(x.abs().amax(-1, /*keepdim=*/true), floor);
    const at::Tensor scale = amax * inv_qmax;
    // A true division by the scale (TileOPs divides; RMSNormDynamicQuantFwdOp multiplies by 1 / scale).
    v.output_tensor().copy_(at::div(x, scale).clamp(-448.0, 448.0).to(at::kFloat8_e4m3fn));
    v.scale_tensor().copy_(scale.squeeze(-1));
  }
};

KernelBuilder fp8_quant_fwd_builder() { return stateless_builder<Fp8QuantReference>("fp8_quant_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, FP8QuantFwdOp, fp8_quant_fwd_builder);

}  // namespace
}  // namespace tileops::reference

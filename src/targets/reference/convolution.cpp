// The convolution family on the reference target: conv1d/2d/3d through their ATen calls (the CPU
// oracle, and what serves CUDA until kernels of its own are verified). The inputs are widened to
// float32 first, so products are summed in float32 and the bias added before the one rounding into the
// output's dtype, as the family's kernels do. padding_str, when given, is ATen's string overload.
#include <ATen/core/Tensor.h>
#include <ATen/ops/conv1d.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/conv3d.h>

#include <optional>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace conv = tileops::ops::family::convolution;

// ATen's conv{1,2,3}d with int padding, and with string padding ('valid' | 'same').
using ConvByInts = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                  at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, int64_t);
using ConvByStr = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                 at::IntArrayRef, c10::string_view, at::IntArrayRef, int64_t);

template <ConvByInts ByInts, ConvByStr ByStr>
class ConvReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const conv::View v(call);  // the three ops hold the same arguments at the same places
    const at::Tensor x = v.input().to(at::kFloat), w = v.weight().to(at::kFloat);
    const std::optional<at::Tensor> b = v.bias() ? std::optional<at::Tensor>(v.bias()->to(at::kFloat)) : std::nullopt;
    const std::optional<std::string_view> mode = v.padding_str();
    v.output().copy_(mode ? ByStr(x, w, b, v.stride(), *mode, v.dilation(), v.groups())
                          : ByInts(x, w, b, v.stride(), v.padding(), v.dilation(), v.groups()));
  }
};

#define TILEOPS_CONV_REFERENCE(Class, fn)                                                                    \
  KernelBuilder fn##_builder() { return stateless_builder<ConvReference<at::fn, at::fn>>(#fn " (ATen, float32)"); } \
  TILEOPS_BUILTIN_KERNEL(reference, Class, fn##_builder);

TILEOPS_CONV_REFERENCE(Conv1dFwdOp, conv1d)
TILEOPS_CONV_REFERENCE(Conv2dFwdOp, conv2d)
TILEOPS_CONV_REFERENCE(Conv3dFwdOp, conv3d)

}  // namespace
}  // namespace tileops::reference

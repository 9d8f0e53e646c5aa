// The pool family on the reference target: avg_pool1d/2d/3d, max_pool1d/2d/3d (with indices or not),
// adaptive_avg_pool2d and adaptive_max_pool2d (with indices or not) through their ATen calls (the CPU
// oracle). stride None is ATen's [].
#include <ATen/core/Tensor.h>
#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/adaptive_max_pool2d.h>
#include <ATen/ops/avg_pool1d.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/avg_pool3d.h>
#include <ATen/ops/max_pool1d.h>
#include <ATen/ops/max_pool1d_with_indices.h>
#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/max_pool2d_with_indices.h>
#include <ATen/ops/max_pool3d.h>
#include <ATen/ops/max_pool3d_with_indices.h>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace avg1 = tileops::ops::pool_avg_pool1d_fwd;
namespace avg2 = tileops::ops::pool_avg_pool2d_fwd;
namespace avg3 = tileops::ops::pool_avg_pool3d_fwd;
namespace max1 = tileops::ops::pool_max_pool1d_fwd;
namespace max2 = tileops::ops::pool_max_pool2d_fwd;
namespace max3 = tileops::ops::pool_max_pool3d_fwd;
namespace adaptive_avg = tileops::ops::pool_adaptive_avg_pool2d_fwd;
namespace adaptive_max = tileops::ops::pool_adaptive_max_pool2d_fwd;
namespace max1i = tileops::ops::pool_max_pool1d_indices_fwd;
namespace max2i = tileops::ops::pool_max_pool2d_indices_fwd;
namespace max3i = tileops::ops::pool_max_pool3d_indices_fwd;
namespace adaptive_maxi = tileops::ops::pool_adaptive_max_pool2d_indices_fwd;

c10::IntArrayRef or_empty(std::optional<c10::IntArrayRef> v) { return v.value_or(c10::IntArrayRef()); }

struct AvgPool1dRef {
  static at::Tensor run(const OpCall& call) {
    const avg1::View v(call);
    return at::avg_pool1d(v.input(), v.kernel_size(), or_empty(v.stride()), v.padding(), v.ceil_mode(),
                          v.count_include_pad());
  }
};
struct AvgPool2dRef {
  static at::Tensor run(const OpCall& call) {
    const avg2::View v(call);
    return at::avg_pool2d(v.input(), v.kernel_size(), or_empty(v.stride()), v.padding(), v.ceil_mode(),
                          v.count_include_pad(), v.divisor_override());
  }
};
struct AvgPool3dRef {
  static at::Tensor run(const OpCall& call) {
    const avg3::View v(call);
    return at::avg_pool3d(v.input(), v.kernel_size(), or_empty(v.stride()), v.padding(), v.ceil_mode(),
                          v.count_include_pad(), v.divisor_override());
  }
};
struct MaxPool1dRef {
  static at::Tensor run(const OpCall& call) {
    const max1::View v(call);
    return at::max_pool1d(v.input(), v.kernel_size(), or_empty(v.stride()), v.padding(), v.dilation(), v.ceil_mode());
  }
};
struct MaxPool2dRef {
  static at::Tensor run(const OpCall& call) {
    const max2::View v(call);
    return at::max_pool2d(v.input(), v.kernel_size(), or_empty(v.stride()), v.padding(), v.dilation(), v.ceil_mode());
  }
};
struct MaxPool3dRef {
  static at::Tensor run(const OpCall& call) {
    const max3::View v(call);
    return at::max_pool3d(v.input(), v.kernel_size(), or_empty(v.stride()), v.padding(), v.dilation(), v.ceil_mode());
  }
};
struct AdaptiveAvgPool2dRef {
  static at::Tensor run(const OpCall& call) {
    const adaptive_avg::View v(call);
    return at::adaptive_avg_pool2d(v.input(), v.output_size());
  }
};
struct AdaptiveMaxPool2dRef {
  static at::Tensor run(const OpCall& call) {
    const adaptive_max::View v(call);
    return std::get<0>(at::adaptive_max_pool2d(v.input(), v.output_size()));
  }
};

// The max pools with indices: (values, indices) from ATen's max_pool{1,2,3}d_with_indices.
using MaxPoolWithIndices = std::tuple<at::Tensor, at::Tensor> (*)(const at::Tensor&, at::IntArrayRef, at::IntArrayRef,
                                                                   at::IntArrayRef, at::IntArrayRef, bool);
template <class V, MaxPoolWithIndices Fn>
struct MaxPoolIndicesRef {
  using View = V;
  static std::tuple<at::Tensor, at::Tensor> run(const View& v) {
    return Fn(v.input(), v.kernel_size(), or_empty(v.stride()), v.padding(), v.dilation(), v.ceil_mode());
  }
};
using MaxPool1dIndicesRef = MaxPoolIndicesRef<max1i::View, at::max_pool1d_with_indices>;
using MaxPool2dIndicesRef = MaxPoolIndicesRef<max2i::View, at::max_pool2d_with_indices>;
using MaxPool3dIndicesRef = MaxPoolIndicesRef<max3i::View, at::max_pool3d_with_indices>;
struct AdaptiveMaxPool2dIndicesRef {
  using View = adaptive_maxi::View;
  static std::tuple<at::Tensor, at::Tensor> run(const View& v) { return at::adaptive_max_pool2d(v.input(), v.output_size()); }
};

template <class R>
class PoolIndicesReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const typename R::View v(call);
    const auto [values, indices] = R::run(v);
    v.output().copy_(values);
    v.indices().copy_(indices);
  }
};

template <class R>
class PoolReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    tileops::ops::family::pool::View(call).output().copy_(R::run(call));
  }
};

#define TILEOPS_POOL_REFERENCE(Class, R, stem)                                                          \
  KernelBuilder stem##_builder() { return stateless_builder<PoolReference<R>>(#stem " (ATen)"); } \
  TILEOPS_BUILTIN_KERNEL(reference, Class, stem##_builder);

TILEOPS_POOL_REFERENCE(AvgPool1dFwdOp, AvgPool1dRef, avg_pool1d)
TILEOPS_POOL_REFERENCE(AvgPool2dFwdOp, AvgPool2dRef, avg_pool2d)
TILEOPS_POOL_REFERENCE(AvgPool3dFwdOp, AvgPool3dRef, avg_pool3d)
TILEOPS_POOL_REFERENCE(MaxPool1dFwdOp, MaxPool1dRef, max_pool1d)
TILEOPS_POOL_REFERENCE(MaxPool2dFwdOp, MaxPool2dRef, max_pool2d)
TILEOPS_POOL_REFERENCE(MaxPool3dFwdOp, MaxPool3dRef, max_pool3d)
TILEOPS_POOL_REFERENCE(AdaptiveAvgPool2dFwdOp, AdaptiveAvgPool2dRef, adaptive_avg_pool2d)
TILEOPS_POOL_REFERENCE(AdaptiveMaxPool2dFwdOp, AdaptiveMaxPool2dRef, adaptive_max_pool2d)

#define TILEOPS_POOL_INDICES_REFERENCE(Class, R, stem)                                                          \
  KernelBuilder stem##_builder() { return stateless_builder<PoolIndicesReference<R>>(#stem " (ATen)"); } \
  TILEOPS_BUILTIN_KERNEL(reference, Class, stem##_builder);

TILEOPS_POOL_INDICES_REFERENCE(MaxPool1dIndicesFwdOp, MaxPool1dIndicesRef, max_pool1d_indices)
TILEOPS_POOL_INDICES_REFERENCE(MaxPool2dIndicesFwdOp, MaxPool2dIndicesRef, max_pool2d_indices)
TILEOPS_POOL_INDICES_REFERENCE(MaxPool3dIndicesFwdOp, MaxPool3dIndicesRef, max_pool3d_indices)
TILEOPS_POOL_INDICES_REFERENCE(AdaptiveMaxPool2dIndicesFwdOp, AdaptiveMaxPool2dIndicesRef, adaptive_max_pool2d_indices)

}  // namespace
}  // namespace tileops::reference

// MaxPool{1,2,3}dIndicesFwdOp and AdaptiveMaxPool2dIndicesFwdOp on the nvrtc target (pool.h):
// problem, plan, launch and registration.
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "targets/builtin.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/pool/pool.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

constexpr int kPoolIndicesCtaThreads = 256;  // kPoolIndicesThreads of the kernel header

namespace max1i = tileops::ops::pool_max_pool1d_indices_fwd;
namespace max2i = tileops::ops::pool_max_pool2d_indices_fwd;
namespace max3i = tileops::ops::pool_max_pool3d_indices_fwd;
namespace adaptivei = tileops::ops::pool_adaptive_max_pool2d_indices_fwd;

// What a call passes: the tensors and its geometry.
struct PoolIndicesArgs {
  const at::Tensor& x;
  const at::Tensor& y;
  const at::Tensor& indices;
  PoolGeometry g;
};
using IndicesReader = PoolIndicesArgs (*)(const OpCall&);

c10::IntArrayRef or_empty(std::optional<c10::IntArrayRef> v) { return v.value_or(c10::IntArrayRef()); }

template <class View, int R>
PoolIndicesArgs pooled_args(const OpCall& call) {
  const View v(call);
  return {v.input(), v.output(), v.indices(),
          pool_geometry(v.input().sizes(), v.output().sizes(), R, v.kernel_size(), or_empty(v.stride()), v.padding(),
                        v.dilation())};
}

PoolIndicesArgs adaptive_args(const OpCall& call) {
  const adaptivei::View v(call);
  return {v.input(), v.output(), v.indices(), pool_geometry(v.input().sizes(), v.output().sizes(), 2, {}, {}, {}, {})};
}

class PoolIndicesKernel final : public Kernel {
 public:
  PoolIndicesKernel(LoadedKernel k, IndicesReader args) : k_(std::move(k)), args_(args) {}
  void launch(const OpCall& call) const override {
    PoolIndicesArgs a = args_(call);
    long long outputs = a.y.numel();
    if (outputs == 0) return;
    const void* xp = a.x.const_data_ptr();
    void* yp = a.y.mutable_data_ptr();
    void* ip = a.indices.mutable_data_ptr();
    void* args[] = {&xp, &yp, &ip, &outputs, &a.g};
    nvrtc::launch(k_, pool_grid(outputs, kPoolIndicesCtaThreads), kPoolIndicesCtaThreads, 0, args);
  }

 private:
  LoadedKernel k_;
  IndicesReader args_;
};

struct PoolIndicesFamily {
  using Problem = PoolIndicesProblem;
  using Spec = PoolIndicesSpec;
  bool adaptive;
  IndicesReader args;
  Problem problem(const OpCall& call) const {
    const PoolIndicesArgs a = args(call);
    return {a.x.scalar_type(), pool_index_bits(a.x.numel(), a.y.numel(), a.g)};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const {
    return {q.dtype, adaptive, q.index_bits, dev.arch};
  }
  std::shared_ptr<const Kernel> make(const Spec&, std::vector<LoadedKernel> k, const DeviceInfo&) const {
    return std::make_shared<PoolIndicesKernel>(std::move(k[0]), args);
  }
};

KernelBuilder max_pool1d_indices_builder() { return spec_builder(PoolIndicesFamily{false, pooled_args<max1i::View, 1>}); }
KernelBuilder max_pool2d_indices_builder() { return spec_builder(PoolIndicesFamily{false, pooled_args<max2i::View, 2>}); }
KernelBuilder max_pool3d_indices_builder() { return spec_builder(PoolIndicesFamily{false, pooled_args<max3i::View, 3>}); }
KernelBuilder adaptive_max_pool2d_indices_builder() { return spec_builder(PoolIndicesFamily{true, adaptive_args}); }

}  // namespace

std::vector<jit::KernelSource> PoolIndicesSpec::sources() const {
  const std::string name = std::string("pool_max_indices_fwd__") + short_type_name(dtype) + "__i" +
                           std::to_string(index_bits) + (adaptive ? "__adaptive" : "") + "__" + arch;
  const std::string expr = std::string("tileops::pool_max_indices_fwd<") + kernel_type_name(dtype) + ", " +
                           (index_bits == 32 ? "int" : "long long") + ", " + (adaptive ? "true" : "false") + ">";
  return {make_source(name, "pool/pool_max_indices_fwd.cuh", expr, arch)};
}

std::string PoolIndicesSpec::describe() const {
  return std::string("pool_max_indices_fwd(dtype=") + short_type_name(dtype) + ", index_bits=" +
         std::to_string(index_bits) + (adaptive ? ", adaptive)" : ")");
}

TILEOPS_BUILTIN_KERNEL(nvrtc, MaxPool1dIndicesFwdOp, max_pool1d_indices_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, MaxPool2dIndicesFwdOp, max_pool2d_indices_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, MaxPool3dIndicesFwdOp, max_pool3d_indices_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, AdaptiveMaxPool2dIndicesFwdOp, adaptive_max_pool2d_indices_builder);

}  // namespace tileops::nvrtc

// MaxPool{1,2,3}dIndicesFwdOp and AdaptiveMaxPool2dIndicesFwdOp on the nvrtc target (pool.h):
// problem, plan, launch and registration.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

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

constexpr int kPoolIndicesThreads = 256;  // a CTA's most; fewer for small calls (pool_cta_threads)

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
  PoolIndicesKernel(LoadedKernel k, IndicesReader args, int sm_count)
      : k_(std::move(k)), args_(args), sm_count_(sm_count) {}
  void launch(const OpCall& call) const override {
    PoolIndicesArgs a = args_(call);
    long long outputs = a.y.numel();
    if (outputs == 0) return;
    const void* xp = a.x.const_data_ptr();
    void* yp = a.y.mutable_data_ptr();
    void* ip = a.indices.mutable_data_ptr();
    PoolDividers dividers = pool_dividers(a.g, 1);
    void* args[] = {&xp, &yp, &ip, &outputs, &a.g, &dividers};
    const int threads = pool_cta_threads(outputs, sm_count_, kPoolIndicesThreads);
    nvrtc::launch(k_, pool_grid(outputs, threads), static_cast<unsigned>(threads), 0, args);
  }

 private:
  LoadedKernel k_;
  IndicesReader args_;
  int sm_count_;
};

struct PoolIndicesFamily {
  using Problem = PoolIndicesProblem;
  using Spec = PoolIndicesSpec;
  int rank;
  bool adaptive;
  IndicesReader args;
  Problem problem(const OpCall& call) const {
    const PoolIndicesArgs a = args(call);
    return {a.x.scalar_type(), rank, pool_index_bits(a.x.numel(), a.y.numel(), a.g),
            adaptive ? PoolWindowParams{} : pool_small_window(a.g)};
  }
  // a small window in the code (taps unrolled, no loop bounds or divisions by kernel params), else
  // one kernel for every window
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const {
    return {q.dtype, q.rank, adaptive, q.index_bits, dev.arch, q.window};
  }
  std::shared_ptr<const Kernel> make(const Spec&, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    return std::make_shared<PoolIndicesKernel>(std::move(k[0]), args, dev.sm_count);
  }
};

KernelBuilder max_pool1d_indices_builder() {
  return spec_builder(PoolIndicesFamily{1, false, pooled_args<max1i::View, 1>});
}
KernelBuilder max_pool2d_indices_builder() {
  return spec_builder(PoolIndicesFamily{2, false, pooled_args<max2i::View, 2>});
}
KernelBuilder max_pool3d_indices_builder() {
  return spec_builder(PoolIndicesFamily{3, false, pooled_args<max3i::View, 3>});
}
KernelBuilder adaptive_max_pool2d_indices_builder() { return spec_builder(PoolIndicesFamily{2, true, adaptive_args}); }

}  // namespace

std::vector<jit::KernelSource> PoolIndicesSpec::sources() const {
  TORCH_CHECK(rank >= 1 && rank <= 3, "tileops: pool_max_indices_fwd pools 1 to 3 dims, not ", rank);
  TORCH_CHECK(!(adaptive && fixed_window()), "tileops: pool_max_indices_fwd: adaptive bins have no fixed window");
  const std::string name = std::string(adaptive ? "adaptive_" : "") + "max_pool" + std::to_string(rank) +
                           "d_indices_fwd__" + short_type_name(dtype) + "__i" + std::to_string(index_bits) +
                           (fixed_window() ? "__" + pool_window_tag(window, rank) : "") + "__" + arch;
  std::string expr = std::string("tileops::pool_max_indices_fwd<") + kernel_type_name(dtype) + ", " +
                     (index_bits == 32 ? "int" : "long long") + ", " + std::to_string(rank) + ", " +
                     (adaptive ? "true" : "false");
  if (fixed_window()) expr += ", " + pool_window_expr(window);
  return {make_source(name, "pool/pool_max_indices_fwd.cuh", expr + ">", arch)};
}

std::string PoolIndicesSpec::describe() const {
  return std::string("pool_max_indices_fwd(") + (adaptive ? "adaptive, " : "") + "rank=" + std::to_string(rank) +
         ", dtype=" + short_type_name(dtype) + ", index=int" + std::to_string(index_bits) +
         (fixed_window() ? ", window=" + pool_window_tag(window, rank) : "") + ")";
}

TILEOPS_BUILTIN_KERNEL(nvrtc, MaxPool1dIndicesFwdOp, max_pool1d_indices_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, MaxPool2dIndicesFwdOp, max_pool2d_indices_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, MaxPool3dIndicesFwdOp, max_pool3d_indices_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, AdaptiveMaxPool2dIndicesFwdOp, adaptive_max_pool2d_indices_builder);

}  // namespace tileops::nvrtc

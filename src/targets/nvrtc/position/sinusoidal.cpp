// SinusoidalFwdOp on the nvrtc target.
#include "targets/nvrtc/position/sinusoidal.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::position_sinusoidal_fwd;

class SinusoidalKernel final : public Kernel {
 public:
  SinusoidalKernel(LoadedKernel k, int vec) : k_(std::move(k)), vec_(vec) {}
  void launch(const OpCall& call) const override {
    const op::View v(call);
    const at::Tensor& out = v.table();
    void* ptr = out.mutable_data_ptr();
    long long num_vecs = out.numel() / vec_;
    int dim = static_cast<int>(v.dim());
    double log2_base = std::log2(v.base());
    void* args[] = {&ptr, &num_vecs, &dim, &log2_base};
    const long long grid = (num_vecs + 255) / 256;
    TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": table too large (", out.numel(), " elements) for one launch");
    nvrtc::launch(k_, static_cast<unsigned>(grid), 256, 0, args);
  }

 private:
  LoadedKernel k_;
  int vec_;
};

struct SinusoidalFamily {
  using Problem = SinusoidalProblem;
  using Spec = SinusoidalSpec;
  Problem problem(const OpCall& call) const {
    const op::View v(call);
    const at::Tensor& out = v.table();
    TORCH_CHECK(v.dim() <= 0x7fffffffLL, call.op_name, ": dim too large");
    const int max_vec = access_width({out.data_ptr()}, static_cast<int>(out.element_size()));
    return {out.scalar_type(), sinusoidal_vec(out.scalar_type(), v.dim(), max_vec)};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const { return {q.dtype, q.vec, dev.arch}; }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo&) const {
    return std::make_shared<SinusoidalKernel>(std::move(k[0]), s.vec);
  }
};

KernelBuilder sinusoidal_builder() { return spec_builder(SinusoidalFamily{}); }

}  // namespace

std::vector<jit::KernelSource> SinusoidalSpec::sources() const { return {sinusoidal_source(dtype, vec, arch)}; }
std::string SinusoidalSpec::describe() const {
  return std::string("sinusoidal_fwd(dtype=") + short_type_name(dtype) + ", vec=" + std::to_string(vec) + ")";
}

int sinusoidal_vec(c10::ScalarType dtype, int64_t dim, int max_vec) {
  // A pair (sin, cos) is the smallest unit; the manifest guarantees an even dim.
  int vec = std::max(2, std::min(16 / static_cast<int>(c10::elementSize(dtype)), max_vec));
  while (vec > 2 && dim % vec != 0) vec /= 2;
  return vec;
}

jit::KernelSource sinusoidal_source(c10::ScalarType dtype, int vec, const std::string& arch) {
  TORCH_CHECK(dtype == c10::kHalf || dtype == c10::kBFloat16 || dtype == c10::kFloat,
              "tileops: sinusoidal_fwd has no kernel for dtype ", dtype);
  return make_source(std::string("sinusoidal_fwd__") + short_type_name(dtype) + "__v" + std::to_string(vec) + "__" + arch,
                     "position/sinusoidal_fwd.cuh",
                     std::string("tileops::sinusoidal_fwd<") + kernel_type_name(dtype) + ", " + std::to_string(vec) + ">",
                     arch);
}

TILEOPS_BUILTIN_KERNEL(nvrtc, SinusoidalFwdOp, sinusoidal_builder);

}  // namespace tileops::nvrtc

// GemmW4A16FwdOp on the nvrtc target: its decode kernel for up to 64 activation rows; the rest it
// declines to the backstops (cuBLASLt after one dequantising pass).
#include "targets/nvrtc/gemm/w4a16.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::gemm_w4_a16_fwd;

class W4A16Kernel final : public Kernel {
 public:
  W4A16Kernel(LoadedKernel k, int warps) : k_(std::move(k)), warps_(warps) {}
  void launch(const OpCall& call) const override {
    const op::View v(call);
    const at::Tensor &x = v.activation(), &w = v.packed_weight(), &out = v.output();
    const int64_t n = w.size(0), k = x.size(1);
    if (x.size(0) == 0 || n == 0) return;  // nothing to write
    TORCH_CHECK(n <= 0x7fffffffLL && k <= 0x7fffffffLL && v.weight_scale().size(1) <= 0x7fffffffLL, call.op_name,
                ": N and K must fit 32 bits for the nvrtc kernel");
    const void *xp = x.const_data_ptr(), *wp = w.const_data_ptr(), *sp = v.weight_scale().const_data_ptr(),
               *zp = v.weight_zero().const_data_ptr();
    void* op_ = out.mutable_data_ptr();
    int M = static_cast<int>(x.size(0)), N = static_cast<int>(n), K = static_cast<int>(k),
        group = static_cast<int>(v.group_size()), groups = static_cast<int>(v.weight_scale().size(1));
    void* args[] = {&xp, &wp, &sp, &zp, &op_, &M, &N, &K, &group, &groups};
    nvrtc::launch(k_, static_cast<unsigned>((n + 15) / 16), static_cast<unsigned>(32 * warps_), 0, args);
  }

 private:
  LoadedKernel k_;
  int warps_;
};

struct W4A16Family {
  using Problem = W4A16Problem;
  using Spec = W4A16Spec;
  Problem problem(const OpCall& call) const {
    const op::View v(call);
    const at::Tensor &x = v.activation(), &w = v.packed_weight();
    const bool aligned = access_width({x.const_data_ptr(), w.const_data_ptr()}, 1) == 16;
    return {x.scalar_type(), w4a16_m_tiles(x.scalar_type(), x.size(0), x.size(1), v.group_size(), aligned)};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const { return w4a16_plan(q, dev); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo&) const {
    if (s.m_tiles == 0) return declined_kernel();
    return std::make_shared<W4A16Kernel>(std::move(k[0]), s.warps);
  }
};

KernelBuilder w4a16_builder() { return spec_builder(W4A16Family{}); }

}  // namespace

int w4a16_m_tiles(c10::ScalarType dtype, int64_t m, int64_t k, int64_t group_size, bool aligned) {
  if ((dtype != c10::kHalf && dtype != c10::kBFloat16) || !aligned) return 0;
  if (m < 1 || m > kW4A16MaxRows || k % 32 != 0 || group_size % 32 != 0) return 0;
  int tiles = 1;
  while (tiles * 8 < m) tiles *= 2;
  return tiles;
}

W4A16Spec w4a16_plan(const W4A16Problem& q, const DeviceFacts& dev) {
  if (q.m_tiles == 0 || dev.sm() < 80) return {q.dtype, 0, 0, ""};  // the MMA needs sm_80
  return {q.dtype, q.m_tiles, kW4A16Warps, dev.arch};
}

bool w4a16_dequant_applies(c10::ScalarType dtype, int64_t k, int64_t group_size, bool aligned, int sm) {
  return (dtype == c10::kHalf || dtype == c10::kBFloat16) && k % 8 == 0 && group_size % 8 == 0 && aligned && sm >= 80;
}

jit::KernelSource w4a16_dequant_source(c10::ScalarType dtype, const std::string& arch) {
  return make_source(std::string("w4a16_dequant__") + short_type_name(dtype) + "__" + arch, "gemm/w4a16_dequant.cuh",
                     std::string("tileops::w4a16_dequant<") + kernel_type_name(dtype) + ">", arch);
}

std::vector<jit::KernelSource> W4A16Spec::sources() const {
  if (m_tiles == 0) return {};
  const std::string name = std::string("w4a16_fwd__") + short_type_name(dtype) + "__mt" + std::to_string(m_tiles) +
                           "_w" + std::to_string(warps) + "__" + arch;
  const std::string expr = std::string("tileops::w4a16_fwd<") + kernel_type_name(dtype) + ", " +
                           std::to_string(m_tiles) + ", " + std::to_string(warps) + ">";
  return {make_source(name, "gemm/w4a16_fwd.cuh", expr, arch)};
}

std::string W4A16Spec::describe() const {
  if (m_tiles == 0) return "gemm_w4a16_fwd (not a decode shape: declined to the backstops)";
  return std::string("w4a16_fwd(dtype=") + short_type_name(dtype) + ", rows<=" + std::to_string(8 * m_tiles) +
         ", warps=" + std::to_string(warps) + ")";
}

TILEOPS_BUILTIN_KERNEL(nvrtc, GemmW4A16FwdOp, w4a16_builder);

}  // namespace tileops::nvrtc

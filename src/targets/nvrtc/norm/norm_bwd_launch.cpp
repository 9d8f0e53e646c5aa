#include "targets/nvrtc/norm/norm_bwd_launch.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cfloat>

#include "common/log.h"
#include "targets/nvrtc/spec_builder.h"

namespace tileops::nvrtc {
namespace {

class NormBwdKernel final : public Kernel {
 public:
  NormBwdKernel(std::vector<LoadedKernel> k, const NormBwdSpec& s, NormBwdArgsOf args_of, int max_grid, int sm_count,
                bool dependent_reduce)
      : k_(std::move(k)),
        s_(s),
        args_of_(args_of),
        max_grid_(max_grid),
        sm_count_(sm_count),
        dependent_reduce_(dependent_reduce) {}

  void launch(const OpCall& call) const override {
    const NormBwdArgs a = args_of_(call);
    const at::Tensor& dy_t = a.dy;
    const void* dy = dy_t.const_data_ptr();
    const void* x = a.x.const_data_ptr();
    const void* w = s_.has_weight ? a.weight->const_data_ptr() : nullptr;
    void* dx = a.dx.mutable_data_ptr();
    long long rows = dy_t.numel() / s_.n;
    // F.rms_norm: eps=None is torch.finfo(float32).eps for float16/bfloat16/float32 inputs.
    float eps = a.eps ? static_cast<float>(*a.eps) : FLT_EPSILON;
    const long long grid = norm_bwd_grid(s_, rows, max_grid_, sm_count_);
    // Per-CTA partial rows: [grid, n] for dweight, then [grid, n] for dbias. M = 0 gives grid = 0:
    // the main kernel is skipped and the reduction writes zeros (the gradient of no rows).
    at::Tensor ws;
    void* part_w = nullptr;
    void* part_b = nullptr;
    if (s_.dw || s_.db) {
      const int64_t per = grid * s_.n;
      ws = at::empty({(int64_t{s_.dw} + int64_t{s_.db}) * per}, dy_t.options().dtype(at::kFloat));
      float* base = ws.mutable_data_ptr<float>();
      if (s_.dw) part_w = base;
      if (s_.db) part_b = base + (s_.dw ? per : 0);
    }
    if (grid > 0) {
      void* args[] = {&dy, &x, &w, &dx, &part_w, &part_b, &rows, &eps};
      nvrtc::launch(k_[0], static_cast<unsigned>(grid), static_cast<unsigned>(s_.threads()),
                    static_cast<unsigned>(s_.smem_bytes), args);
    }
    if (k_.size() > 1) {
      void* dweight = s_.dw ? a.dweight->mutable_data_ptr() : nullptr;
      void* dbias = s_.db ? a.dbias->mutable_data_ptr() : nullptr;
      int parts = static_cast<int>(grid);
      int n = s_.n;
      void* args[] = {&part_w, &part_b, &dweight, &dbias, &parts, &n};
      // 32 warps a CTA: kReduceWarps in norm_bwd_common.cuh.
      const auto rgrid = static_cast<unsigned>((s_.n + 31) / 32);
      // Dependent only on our own main kernel: with no rows there is none, and the reduction would
      // depend on whatever the stream ran before.
      if (dependent_reduce_ && grid > 0) nvrtc::launch_dependent(k_[1], rgrid, 1024, 0, args);
      else nvrtc::launch(k_[1], rgrid, 1024, 0, args);
    }
  }

 private:
  std::vector<LoadedKernel> k_;  // main, then the reduction when a weight gradient is wanted
  NormBwdSpec s_;
  NormBwdArgsOf args_of_;
  int max_grid_;
  int sm_count_;
  bool dependent_reduce_;  // the reduction is a programmatic dependent launch (sm_90+)
};

}  // namespace

NormBwdProblem NormBwdFamily::problem(const OpCall& call) const {
  const NormBwdArgs a = args(call);
  // A float32 weight beside a 16-bit row (the manifests' dtype_combos allow no other mix).
  const bool float_weight = a.weight && a.weight->scalar_type() != a.dy.scalar_type();
  int max_vec = access_width({a.dy.data_ptr(), a.x.data_ptr(), a.dx.data_ptr(),
                              a.weight && !float_weight ? a.weight->data_ptr() : nullptr},
                             static_cast<int>(a.dy.element_size()));
  if (float_weight) {
    // VEC float weights are read in pieces of up to 16 bytes: below 16-byte alignment the whole
    // vector must fit what the weight's alignment allows.
    const int w_vec = access_width({a.weight->data_ptr()}, 4);
    if (w_vec * 4 < 16) max_vec = std::min(max_vec, w_vec);
  }
  NormBwdProblem q{layer,
                   a.dy.scalar_type(),
                   c10::multiply_integers(a.normalized_shape),
                   max_vec,
                   a.weight != nullptr,
                   a.dweight != nullptr,
                   a.dbias != nullptr};
  q.float_weight = float_weight;
  return q;
}

std::shared_ptr<const Kernel> NormBwdFamily::make(const NormBwdSpec& s, std::vector<LoadedKernel> k,
                                                  const DeviceInfo& dev) const {
  allow_dynamic_smem(k[0], s.smem_bytes, dev);
  const bool dependent = dependent_launch_supported(dev) && !s.plain_reduce;
  if (k.size() > 1)
    log::debug("tileops: " + k[1].name + (dependent ? " is a programmatic dependent launch" : " is a plain launch"));
  const int max_grid = norm_bwd_max_grid(s, dev);
  return std::make_shared<NormBwdKernel>(std::move(k), s, args, max_grid, dev.sm_count, dependent);
}


}  // namespace tileops::nvrtc

#include "targets/nvrtc/norm/row_norm_launch.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cfloat>

#include "targets/nvrtc/spec_builder.h"

namespace tileops::nvrtc {
namespace {

const void* ptr_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

class RowNormKernel final : public Kernel {
 public:
  RowNormKernel(LoadedKernel k, const RowNormSpec& s, RowNormSlots slots)
      : k_(std::move(k)),
        op_(s.op),
        n_(s.n),
        rows_per_cta_(s.rows),
        cluster_(s.cluster),
        block_(static_cast<unsigned>(s.tpr * s.rows)),
        smem_(static_cast<unsigned>(s.smem_bytes())),
        weight_(s.weight),
        bias_(s.bias),
        slots_(slots) {}

  void launch(const OpCall& call) const override {
    const void* x = call.inputs[slots_.x].const_data_ptr();
    const void* w = weight_ ? call.inputs[slots_.weight].const_data_ptr() : nullptr;
    void* y = call.outputs[slots_.y].mutable_data_ptr();
    long long rows = call.inputs[slots_.x].numel() / n_;
    float eps = eps_of(call);
    const long long grid = cluster_ > 1 ? rows * cluster_ : (rows + rows_per_cta_ - 1) / rows_per_cta_;
    TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many rows (", rows, ") for one launch");
    if (op_ == RowNormOp::kFusedAddRmsNorm) {
      const void* r_in = call.inputs[slots_.residual].const_data_ptr();
      void* r_out = call.outputs[slots_.residual_out].mutable_data_ptr();  // the residual itself when in place
      void* args[] = {&x, &r_in, &r_out, &w, &y, &rows, &eps};
      return run(grid, args);
    }
    if (op_ == RowNormOp::kLayerNorm) {
      const void* b = bias_ ? call.inputs[slots_.bias].const_data_ptr() : nullptr;
      void* args[] = {&x, &w, &b, &y, &rows, &eps};
      return run(grid, args);
    }
    void* args[] = {&x, &w, &y, &rows, &eps};
    run(grid, args);
  }

 private:
  float eps_of(const OpCall& call) const {
    // F.rms_norm: eps=None is torch.finfo(float32).eps for float16/bfloat16/float32 inputs.
    const auto eps = call.params[slots_.eps].as_optional_real();
    return eps ? static_cast<float>(*eps) : FLT_EPSILON;
  }
  void run(long long grid, void** args) const {
    if (cluster_ > 1)
      nvrtc::launch_cluster(k_, static_cast<unsigned>(grid), block_, static_cast<unsigned>(cluster_), smem_, args);
    else
      nvrtc::launch(k_, static_cast<unsigned>(grid), block_, smem_, args);
  }

  LoadedKernel k_;
  RowNormOp op_;
  int n_, rows_per_cta_, cluster_;
  unsigned block_, smem_;
  bool weight_, bias_;
  RowNormSlots slots_;
};

}  // namespace

RowNormProblem RowNormFamily::problem(const OpCall& call) const {
  const at::Tensor& x = call.inputs[slots.x];
  const at::Tensor& w = call.inputs[slots.weight];
  const bool has_bias = slots.bias >= 0 && call.inputs[slots.bias].defined();
  const bool res = slots.residual >= 0;
  // A float32 weight beside a 16-bit row (the manifests' dtype_combos allow no other mix).
  const bool float_weight = w.defined() && w.scalar_type() != x.scalar_type();
  int max_vec = access_width({x.data_ptr(), call.outputs[slots.y].data_ptr(), float_weight ? nullptr : ptr_or_null(w),
                              has_bias ? call.inputs[slots.bias].data_ptr() : nullptr,
                              res ? call.inputs[slots.residual].data_ptr() : nullptr,
                              res ? call.outputs[slots.residual_out].data_ptr() : nullptr},
                             static_cast<int>(x.element_size()));
  if (float_weight) {
    // The kernel reads VEC float weights in pieces of up to 16 bytes: below 16-byte alignment the
    // whole vector must fit what the weight's alignment allows.
    const int w_vec = access_width({w.data_ptr()}, static_cast<int>(w.element_size()));
    if (w_vec * w.element_size() < 16) max_vec = std::min(max_vec, w_vec);
  }
  RowNormProblem q{op, x.scalar_type(), c10::multiply_integers(call.params[slots.normalized_shape].as_ints()),
                   max_vec, w.defined(), has_bias};
  q.float_weight = float_weight;
  q.gemma = gemma;
  return q;
}

std::shared_ptr<const Kernel> RowNormFamily::make(const RowNormSpec& s, std::vector<LoadedKernel> k,
                                                  const DeviceInfo& dev) const {
  if (s.cluster > 8) allow_large_clusters(k[0], s.cluster);
  allow_dynamic_smem(k[0], s.smem_bytes(), dev);
  return std::make_shared<RowNormKernel>(std::move(k[0]), s, slots);
}


}  // namespace tileops::nvrtc

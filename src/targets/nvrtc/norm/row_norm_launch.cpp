#include "targets/nvrtc/norm/row_norm_launch.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cfloat>

#include "targets/nvrtc/spec_builder.h"

namespace tileops::nvrtc {
namespace {

const void* ptr_or_null(const at::Tensor* t) { return t ? t->data_ptr() : nullptr; }

class RowNormKernel final : public Kernel {
 public:
  RowNormKernel(LoadedKernel k, const RowNormSpec& s, RowNormArgsOf args_of)
      : k_(std::move(k)),
        op_(s.op),
        n_(s.n),
        rows_per_cta_(s.rows),
        cluster_(s.cluster),
        block_(static_cast<unsigned>(s.tpr * s.rows)),
        smem_(static_cast<unsigned>(s.smem_bytes())),
        weight_(s.weight),
        bias_(s.bias),
        quant_(s.quant),
        args_of_(args_of) {}

  void launch(const OpCall& call) const override {
    const RowNormArgs a = args_of_(call);
    const void* x = a.x.const_data_ptr();
    const void* w = weight_ ? a.weight->const_data_ptr() : nullptr;
    void* y = a.y.mutable_data_ptr();
    long long rows = a.x.numel() / n_;
    // F.rms_norm: eps=None is torch.finfo(float32).eps for float16/bfloat16/float32 inputs.
    float eps = a.eps ? static_cast<float>(*a.eps) : FLT_EPSILON;
    const long long grid = cluster_ > 1 ? rows * cluster_ : (rows + rows_per_cta_ - 1) / rows_per_cta_;
    TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many rows (", rows, ") for one launch");
    if (quant_ != RowNormQuant::kNone) {
      const void* scale = a.scale ? a.scale->const_data_ptr() : nullptr;  // dynamic: scale_ub or none
      void* scales = quant_ == RowNormQuant::kDynamic ? a.scales->mutable_data_ptr() : nullptr;
      if (op_ == RowNormOp::kFusedAddRmsNorm) {
        const void* r_in = a.residual->const_data_ptr();
        void* r_out = a.residual_out->mutable_data_ptr();
        void* args[] = {&x, &r_in, &r_out, &w, &y, &scale, &scales, &rows, &eps};
        return run(grid, args);
      }
      void* args[] = {&x, &w, &y, &scale, &scales, &rows, &eps};
      return run(grid, args);
    }
    if (op_ == RowNormOp::kFusedAddRmsNorm) {
      const void* r_in = a.residual->const_data_ptr();
      void* r_out = a.residual_out->mutable_data_ptr();  // the residual itself when in place
      void* args[] = {&x, &r_in, &r_out, &w, &y, &rows, &eps};
      return run(grid, args);
    }
    if (op_ == RowNormOp::kLayerNorm) {
      const void* b = bias_ ? a.bias->const_data_ptr() : nullptr;
      void* args[] = {&x, &w, &b, &y, &rows, &eps};
      return run(grid, args);
    }
    void* args[] = {&x, &w, &y, &rows, &eps};
    run(grid, args);
  }

 private:
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
  RowNormQuant quant_;
  RowNormArgsOf args_of_;
};

}  // namespace

RowNormProblem RowNormFamily::problem(const OpCall& call) const {
  const RowNormArgs a = args(call);
  // A float32 weight (and LayerNorm's bias) beside a 16-bit row: the manifests' dtype_combos allow no
  // other mix, and make weight and bias the same dtype when both are given.
  const bool float_weight = (a.weight && a.weight->scalar_type() != a.x.scalar_type()) ||
                            (a.bias && a.bias->scalar_type() != a.x.scalar_type());
  int max_vec = access_width({a.x.data_ptr(), a.y.data_ptr(), float_weight ? nullptr : ptr_or_null(a.weight),
                              float_weight ? nullptr : ptr_or_null(a.bias), ptr_or_null(a.residual),
                              ptr_or_null(a.residual_out)},
                             static_cast<int>(a.x.element_size()));
  // The kernel reads VEC float weights in pieces of up to 16 bytes: below 16-byte alignment the whole
  // vector must fit what the weight's (and bias') alignment allows.
  for (const at::Tensor* f : {a.weight, a.bias}) {
    if (!float_weight || f == nullptr) continue;
    const int w_vec = access_width({f->data_ptr()}, static_cast<int>(f->element_size()));
    if (w_vec * f->element_size() < 16) max_vec = std::min(max_vec, w_vec);
  }
  RowNormProblem q{op, a.x.scalar_type(), c10::multiply_integers(a.normalized_shape), max_vec, a.weight != nullptr,
                   a.bias != nullptr};
  q.float_weight = float_weight;
  q.gemma = gemma;
  q.few_rows = row_norm_few_rows(q.n == 0 ? 0 : a.x.numel() / q.n);
  q.quant = quant;
  if (quant != RowNormQuant::kNone) {
    q.qdtype = a.y.scalar_type();
    // q has one byte an element: its vectors are VEC bytes wide.
    q.max_vec = std::min(q.max_vec, access_width({a.y.data_ptr()}, 1));
  }
  return q;
}

std::shared_ptr<const Kernel> RowNormFamily::make(const RowNormSpec& s, std::vector<LoadedKernel> k,
                                                  const DeviceInfo& dev) const {
  if (s.cluster > 8) allow_large_clusters(k[0], s.cluster);
  allow_dynamic_smem(k[0], s.smem_bytes(), dev);
  return std::make_shared<RowNormKernel>(std::move(k[0]), s, args);
}


}  // namespace tileops::nvrtc

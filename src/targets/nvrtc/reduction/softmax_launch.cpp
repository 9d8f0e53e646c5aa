#include "targets/nvrtc/reduction/softmax_launch.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>

#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

// Softmax and log_softmax share one launcher: it reads x, y and dim through softmax's view, which
// log_softmax's arguments match slot for slot.
using SoftmaxView = tileops::ops::reduction_softmax_fwd::View;
namespace softmax_op = tileops::ops::reduction_softmax_fwd;
namespace log_softmax_op = tileops::ops::reduction_log_softmax_fwd;
static_assert(softmax_op::In::x == log_softmax_op::In::x && softmax_op::Out::y == log_softmax_op::Out::y &&
              softmax_op::Param::dim == log_softmax_op::Param::dim);

// The reduced dim, wrapped as torch does (a 0-dim x is a 1-element row).
int64_t wrapped_dim(const SoftmaxView& v) {
  const int64_t nd = v.x().dim();
  const int64_t d = v.dim();
  return nd == 0 ? 0 : (d < 0 ? d + nd : d);
}

bool dim_is_last(const SoftmaxView& v) {
  const int64_t nd = v.x().dim();
  return nd == 0 || wrapped_dim(v) == nd - 1;
}

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(std::vector<LoadedKernel> k, const SoftmaxSpec& s) : k_(std::move(k)), s_(s), smem_(s.smem_bytes()) {}

  void launch(const OpCall& call) const override {
    const SoftmaxView v(call);
    const at::Tensor& x = v.x();
    const at::Tensor& y = v.y();
    if (dim_is_last(v)) return run(call, x, y);
    // Known cost (see softmax_launch.h): move the dim last, compute, copy back into y's layout.
    const int64_t d = wrapped_dim(v);
    const at::Tensor xt = x.movedim(d, -1).contiguous();
    const at::Tensor yt = at::empty_like(xt, at::MemoryFormat::Contiguous);
    run(call, xt, yt);
    y.copy_(yt.movedim(-1, d));
  }

 private:
  void run(const OpCall& call, const at::Tensor& x, const at::Tensor& y) const {
    const void* xp = x.const_data_ptr();
    void* yp = y.mutable_data_ptr();
    long long rows = x.numel() / s_.n;
    if (s_.impl == SoftmaxImpl::kSplit) {
      const long long grid = rows * s_.splits;
      TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many rows (", rows, ") for one launch");
      // Per-row partial (max, sum) pairs: a small temporary from the torch allocator.
      const at::Tensor ws = at::empty({grid * 2}, x.options().dtype(at::kFloat));
      void* wp = ws.mutable_data_ptr();
      void* stats_args[] = {&xp, &wp};
      nvrtc::launch(k_[0], static_cast<unsigned>(grid), static_cast<unsigned>(s_.tpb), 0, stats_args);
      void* apply_args[] = {&xp, &wp, &yp};
      nvrtc::launch(k_[1], static_cast<unsigned>(grid), static_cast<unsigned>(s_.tpb), 0, apply_args);
      return;
    }
    void* args[] = {&xp, &yp, &rows};
    if (s_.impl == SoftmaxImpl::kCluster) {
      const long long grid = rows * s_.cluster;
      TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many rows (", rows, ") for one launch");
      nvrtc::launch_cluster(k_[0], static_cast<unsigned>(grid), static_cast<unsigned>(s_.tpb),
                            static_cast<unsigned>(s_.cluster), 0, args);
      return;
    }
    const long long grid = (rows + s_.rows - 1) / s_.rows;  // staged: rows = 1
    TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many rows (", rows, ") for one launch");
    nvrtc::launch(k_[0], static_cast<unsigned>(grid), static_cast<unsigned>(s_.tpr * s_.rows),
                  static_cast<unsigned>(smem_), args);
  }

  std::vector<LoadedKernel> k_;
  SoftmaxSpec s_;
  int smem_;
};

}  // namespace

SoftmaxProblem SoftmaxFamily::problem(const OpCall& call) const {
  const SoftmaxView v(call);
  const at::Tensor& x = v.x();
  const int64_t n = x.dim() == 0 ? 1 : x.size(wrapped_dim(v));
  TORCH_CHECK(n <= (int64_t{1} << 30), call.op_name, ": the nvrtc target reduces dims of at most 2^30 elements, got ",
              n);
  // Widest access x and y allow. A moved dim computes on fresh (allocator-aligned) temporaries.
  const int elem = static_cast<int>(x.element_size());
  const int max_vec = dim_is_last(v) ? access_width({x.data_ptr(), v.y().data_ptr()}, elem) : 16 / elem;
  return SoftmaxProblem{log, x.scalar_type(), n, max_vec, softmax_few_rows(n == 0 ? 0 : x.numel() / n)};
}

std::shared_ptr<const Kernel> SoftmaxFamily::make(const SoftmaxSpec& s, std::vector<LoadedKernel> k,
                                                  const DeviceInfo& dev) const {
  if (s.impl == SoftmaxImpl::kCluster) allow_large_clusters(k[0], s.cluster);
  allow_dynamic_smem(k[0], s.smem_bytes(), dev);
  return std::make_shared<SoftmaxKernel>(std::move(k), s);
}

KernelBuilder softmax_builder(bool log) { return spec_builder(SoftmaxFamily{log}); }

}  // namespace tileops::nvrtc

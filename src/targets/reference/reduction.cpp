// The reduction family (manifests/reduction.yaml) on the reference target: each op's ref_api with
// ATen, the oracle of the nvrtc reduction, scan and softmax engines.

#include <ATen/core/Tensor.h>
#include <ATen/ops/all.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/any.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/argmin.h>
#include <ATen/ops/count_nonzero.h>
#include <ATen/ops/cumprod.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/logcumsumexp.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/prod.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/std.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/var.h>
#include <ATen/ops/var_mean.h>

#include <limits>
#include <optional>

#include "targets/builtin.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {

// The dim reductions (SumFwdOp ... LogSumExpFwdOp) on the reference target: each op's ref_api called
// with the call's params, the oracle of the nvrtc reduction engine.
namespace {

// An `int[]?` dim param as ATen takes it (None stays None).
at::OptionalIntArrayRef dims_of(std::optional<c10::IntArrayRef> d) {
  return d.has_value() ? at::OptionalIntArrayRef(*d) : at::OptionalIntArrayRef();
}

// One reference kernel per op: F(call) computes the result(s) and copies them into the outputs.
template <class F>
class ReduceReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override { F{}(call); }
};

#define TILEOPS_REDUCE_REFERENCE(Class, stem, body)                                      \
  struct stem##_ref {                                                                    \
    void operator()(const OpCall& call) const {                                          \
      const tileops::ops::reduction_##stem##_fwd::View v(call);                          \
      const at::Tensor& x = v.x();                                                       \
      body                                                                               \
    }                                                                                    \
  };                                                                                     \
  KernelBuilder stem##_builder() { return stateless_builder<ReduceReference<stem##_ref>>(#stem " (ATen)"); } \
  TILEOPS_BUILTIN_KERNEL(reference, Class, stem##_builder);

TILEOPS_REDUCE_REFERENCE(SumFwdOp, sum, {
  v.y().copy_(at::sum(x, dims_of(v.dim()), v.keepdim(), v.dtype()));
})
TILEOPS_REDUCE_REFERENCE(MeanFwdOp, mean, {
  v.y().copy_(at::mean(x, dims_of(v.dim()), v.keepdim(), v.dtype()));
})
TILEOPS_REDUCE_REFERENCE(AmaxFwdOp, amax, {
  const auto d = dims_of(v.dim());
  v.y().copy_(at::amax(x, d.has_value() ? *d : at::IntArrayRef(), v.keepdim()));
})
TILEOPS_REDUCE_REFERENCE(AminFwdOp, amin, {
  const auto d = dims_of(v.dim());
  v.y().copy_(at::amin(x, d.has_value() ? *d : at::IntArrayRef(), v.keepdim()));
})
TILEOPS_REDUCE_REFERENCE(ProdFwdOp, prod, {
  // torch.prod has no dim=None overload with keepdim: the whole product, broadcast into y's ones.
  const auto dim = v.dim();
  const auto dtype = v.dtype();
  v.y().copy_(dim.has_value() ? at::prod(x, *dim, v.keepdim(), dtype) : at::prod(x, dtype));
})
TILEOPS_REDUCE_REFERENCE(VarFwdOp, var, {
  v.y().copy_(
      at::var(x, dims_of(v.dim()), at::Scalar(v.correction()), v.keepdim()));
})
TILEOPS_REDUCE_REFERENCE(StdFwdOp, std, {
  v.y().copy_(
      at::std(x, dims_of(v.dim()), at::Scalar(v.correction()), v.keepdim()));
})
TILEOPS_REDUCE_REFERENCE(VarMeanFwdOp, var_mean, {
  const auto vm =
      at::var_mean(x, dims_of(v.dim()), at::Scalar(v.correction()), v.keepdim());
  v.var().copy_(std::get<0>(vm));
  v.mean().copy_(std::get<1>(vm));
})
TILEOPS_REDUCE_REFERENCE(ArgmaxFwdOp, argmax, {
  v.y().copy_(at::argmax(x, v.dim(), v.keepdim()));
})
TILEOPS_REDUCE_REFERENCE(ArgminFwdOp, argmin, {
  v.y().copy_(at::argmin(x, v.dim(), v.keepdim()));
})
TILEOPS_REDUCE_REFERENCE(AllFwdOp, all, {
  v.y().copy_(at::all(x, dims_of(v.dim()), v.keepdim()));
})
TILEOPS_REDUCE_REFERENCE(AnyFwdOp, any, {
  v.y().copy_(at::any(x, dims_of(v.dim()), v.keepdim()));
})
TILEOPS_REDUCE_REFERENCE(CountNonzeroFwdOp, count_nonzero, {
  const auto d = dims_of(v.dim());
  v.y().copy_(d.has_value() ? at::count_nonzero(x, *d) : at::count_nonzero(x, std::nullopt));
})
TILEOPS_REDUCE_REFERENCE(L1NormFwdOp, l1_norm, {
  v.y().copy_(at::linalg_vector_norm(x, 1, dims_of(v.dim()), v.keepdim()));
})
TILEOPS_REDUCE_REFERENCE(L2NormFwdOp, l2_norm, {
  v.y().copy_(at::linalg_vector_norm(x, 2, dims_of(v.dim()), v.keepdim()));
})
TILEOPS_REDUCE_REFERENCE(InfNormFwdOp, inf_norm, {
  v.y().copy_(
      at::linalg_vector_norm(x, std::numeric_limits<double>::infinity(), dims_of(v.dim()), v.keepdim()));
})
TILEOPS_REDUCE_REFERENCE(LogSumExpFwdOp, log_sum_exp, {
  v.y().copy_(at::logsumexp(x, v.dim(), v.keepdim()));
})

}  // namespace

// The scans on the reference target: ref_api itself (at::cumsum / at::cumprod with dtype=,
// at::logcumsumexp) written straight into y, the oracle of the nvrtc scan engine.
namespace {

namespace cumsum = tileops::ops::reduction_cumsum_fwd;
namespace cumprod = tileops::ops::reduction_cumprod_fwd;
namespace logcumsumexp = tileops::ops::reduction_log_cum_sum_exp_fwd;

class CumsumReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const cumsum::View v(call);
    at::Tensor y = v.y();  // contiguous, y's dtype: the out variant writes it in place
    at::cumsum_out(y, v.x(), v.dim(), v.dtype());
  }
};

class CumprodReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const cumprod::View v(call);
    at::Tensor y = v.y();
    at::cumprod_out(y, v.x(), v.dim(), v.dtype());
  }
};

class LogCumSumExpReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const logcumsumexp::View v(call);
    at::Tensor y = v.y();
    at::logcumsumexp_out(y, v.x(), v.dim());
  }
};

KernelBuilder cumsum_fwd_builder() { return stateless_builder<CumsumReference>("cumsum_fwd (ATen)"); }
KernelBuilder cumprod_fwd_builder() { return stateless_builder<CumprodReference>("cumprod_fwd (ATen)"); }
KernelBuilder log_cum_sum_exp_fwd_builder() {
  return stateless_builder<LogCumSumExpReference>("log_cum_sum_exp_fwd (ATen)");
}

}  // namespace

TILEOPS_BUILTIN_KERNEL(reference, CumsumFwdOp, cumsum_fwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, CumprodFwdOp, cumprod_fwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, LogCumSumExpFwdOp, log_cum_sum_exp_fwd_builder);

// SoftmaxFwdOp on the reference target: ref_api itself (at::softmax with dtype=None), the oracle.
namespace {

namespace softmax_fwd = tileops::ops::reduction_softmax_fwd;

class SoftmaxReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const softmax_fwd::View v(call);
    v.y().copy_(at::softmax(v.x(), v.dim()));
  }
};

KernelBuilder softmax_fwd_builder() { return stateless_builder<SoftmaxReference>("softmax_fwd (ATen)"); }

}  // namespace

TILEOPS_BUILTIN_KERNEL(reference, SoftmaxFwdOp, softmax_fwd_builder);

// LogSoftmaxFwdOp on the reference target: ref_api itself (at::log_softmax with dtype=None), the oracle.
namespace {

namespace log_softmax_fwd = tileops::ops::reduction_log_softmax_fwd;

class LogSoftmaxReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const log_softmax_fwd::View v(call);
    v.y().copy_(at::log_softmax(v.x(), v.dim()));
  }
};

KernelBuilder log_softmax_fwd_builder() { return stateless_builder<LogSoftmaxReference>("log_softmax_fwd (ATen)"); }

}  // namespace

TILEOPS_BUILTIN_KERNEL(reference, LogSoftmaxFwdOp, log_softmax_fwd_builder);

}  // namespace tileops::reference

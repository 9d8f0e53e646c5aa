// The dim reductions (SumFwdOp ... LogSumExpFwdOp) on the reference target: each op's ref_api called
// with the call's params, the oracle of the nvrtc reduction engine.
#include <ATen/core/Tensor.h>
#include <ATen/ops/all.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/any.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/argmin.h>
#include <ATen/ops/count_nonzero.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/prod.h>
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
namespace {

// An `int[]?` dim param as ATen takes it (None stays None).
at::OptionalIntArrayRef dims_of(const ParamValue& p) {
  return p.is_none() ? at::OptionalIntArrayRef() : at::OptionalIntArrayRef(p.as_ints());
}
std::optional<at::ScalarType> dtype_of(const ParamValue& p) {
  return p.is_none() ? std::nullopt : std::optional<at::ScalarType>(p.as_dtype());
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
      namespace op = tileops::ops::reduction_##stem##_fwd;                               \
      const at::Tensor& x = call.inputs[op::x];                                          \
      const auto& p = call.params;                                                       \
      body                                                                               \
    }                                                                                    \
  };                                                                                     \
  KernelBuilder stem##_builder() { return stateless_builder<ReduceReference<stem##_ref>>(#stem " (ATen)"); } \
  TILEOPS_BUILTIN_KERNEL(reference, Class, stem##_builder);

TILEOPS_REDUCE_REFERENCE(SumFwdOp, sum, {
  call.outputs[op::y].copy_(at::sum(x, dims_of(p[op::dim]), p[op::keepdim].as_bool(), dtype_of(p[op::dtype])));
})
TILEOPS_REDUCE_REFERENCE(MeanFwdOp, mean, {
  call.outputs[op::y].copy_(at::mean(x, dims_of(p[op::dim]), p[op::keepdim].as_bool(), dtype_of(p[op::dtype])));
})
TILEOPS_REDUCE_REFERENCE(AmaxFwdOp, amax, {
  const auto d = dims_of(p[op::dim]);
  call.outputs[op::y].copy_(at::amax(x, d.has_value() ? *d : at::IntArrayRef(), p[op::keepdim].as_bool()));
})
TILEOPS_REDUCE_REFERENCE(AminFwdOp, amin, {
  const auto d = dims_of(p[op::dim]);
  call.outputs[op::y].copy_(at::amin(x, d.has_value() ? *d : at::IntArrayRef(), p[op::keepdim].as_bool()));
})
TILEOPS_REDUCE_REFERENCE(ProdFwdOp, prod, {
  // torch.prod has no dim=None overload with keepdim: the whole product, broadcast into y's ones.
  const auto dim = p[op::dim].as_optional_int();
  const auto dtype = dtype_of(p[op::dtype]);
  call.outputs[op::y].copy_(dim.has_value() ? at::prod(x, *dim, p[op::keepdim].as_bool(), dtype) : at::prod(x, dtype));
})
TILEOPS_REDUCE_REFERENCE(VarFwdOp, var, {
  call.outputs[op::y].copy_(
      at::var(x, dims_of(p[op::dim]), at::Scalar(p[op::correction].as_int()), p[op::keepdim].as_bool()));
})
TILEOPS_REDUCE_REFERENCE(StdFwdOp, std, {
  call.outputs[op::y].copy_(
      at::std(x, dims_of(p[op::dim]), at::Scalar(p[op::correction].as_int()), p[op::keepdim].as_bool()));
})
TILEOPS_REDUCE_REFERENCE(VarMeanFwdOp, var_mean, {
  const auto vm =
      at::var_mean(x, dims_of(p[op::dim]), at::Scalar(p[op::correction].as_int()), p[op::keepdim].as_bool());
  call.outputs[op::var].copy_(std::get<0>(vm));
  call.outputs[op::mean].copy_(std::get<1>(vm));
})
TILEOPS_REDUCE_REFERENCE(ArgmaxFwdOp, argmax, {
  call.outputs[op::y].copy_(at::argmax(x, p[op::dim].as_optional_int(), p[op::keepdim].as_bool()));
})
TILEOPS_REDUCE_REFERENCE(ArgminFwdOp, argmin, {
  call.outputs[op::y].copy_(at::argmin(x, p[op::dim].as_optional_int(), p[op::keepdim].as_bool()));
})
TILEOPS_REDUCE_REFERENCE(AllFwdOp, all, {
  call.outputs[op::y].copy_(at::all(x, dims_of(p[op::dim]), p[op::keepdim].as_bool()));
})
TILEOPS_REDUCE_REFERENCE(AnyFwdOp, any, {
  call.outputs[op::y].copy_(at::any(x, dims_of(p[op::dim]), p[op::keepdim].as_bool()));
})
TILEOPS_REDUCE_REFERENCE(CountNonzeroFwdOp, count_nonzero, {
  const auto d = dims_of(p[op::dim]);
  call.outputs[op::y].copy_(d.has_value() ? at::count_nonzero(x, *d) : at::count_nonzero(x, std::nullopt));
})
TILEOPS_REDUCE_REFERENCE(L1NormFwdOp, l1_norm, {
  call.outputs[op::y].copy_(at::linalg_vector_norm(x, 1, dims_of(p[op::dim]), p[op::keepdim].as_bool()));
})
TILEOPS_REDUCE_REFERENCE(L2NormFwdOp, l2_norm, {
  call.outputs[op::y].copy_(at::linalg_vector_norm(x, 2, dims_of(p[op::dim]), p[op::keepdim].as_bool()));
})
TILEOPS_REDUCE_REFERENCE(InfNormFwdOp, inf_norm, {
  call.outputs[op::y].copy_(
      at::linalg_vector_norm(x, std::numeric_limits<double>::infinity(), dims_of(p[op::dim]), p[op::keepdim].as_bool()));
})
TILEOPS_REDUCE_REFERENCE(LogSumExpFwdOp, log_sum_exp, {
  call.outputs[op::y].copy_(at::logsumexp(x, p[op::dim].as_ints(), p[op::keepdim].as_bool()));
})

}  // namespace
}  // namespace tileops::reference

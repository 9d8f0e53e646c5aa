// The code generated for RMSNormFwdOp, seen from C++: op table, compile_op_names, registered schema,
// typed call views.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include "tileops/op_call.h"
#include "tileops/ops.h"
#include "tileops_generated/ops.h"

TEST(Codegen, OpTableHoldsRmsNorm) {
  const tileops::OpInfo* op = tileops::find_op("RMSNormFwdOp");
  ASSERT_NE(op, nullptr);
  EXPECT_STREQ(op->family, "norm");
  EXPECT_STREQ(op->name, "norm_rms_norm_fwd");
  EXPECT_STREQ(op->ref_api, "torch.nn.functional.rms_norm");
  EXPECT_TRUE(op->has_boundary);
  ASSERT_EQ(op->num_operators, 2);  // the plain operator and its `out=` branch
  EXPECT_STREQ(op->operators[0], "tileops::norm_rms_norm_fwd");
  EXPECT_STREQ(op->operators[1], "tileops::norm_rms_norm_fwd_out");
  EXPECT_EQ(tileops::compile_op_names("RMSNormFwdOp"),
            (std::vector<std::string>{"tileops::norm_rms_norm_fwd", "tileops::norm_rms_norm_fwd_out"}));
  EXPECT_EQ(tileops::find_op("norm_rms_norm_fwd"), op);
  EXPECT_EQ(op - tileops::op_table().data(), tileops::ops::norm_rms_norm_fwd::kId);
  EXPECT_THROW(tileops::compile_op_names("NoSuchOp"), std::invalid_argument);
}

TEST(Codegen, GeneratedIndicesFollowManifestOrder) {
  namespace op = tileops::ops::norm_rms_norm_fwd;
  EXPECT_EQ(op::x, 0);
  EXPECT_EQ(op::weight, 1);
  EXPECT_EQ(op::normalized_shape, 0);
  EXPECT_EQ(op::eps, 1);
  EXPECT_EQ(op::y, 0);
}

TEST(Codegen, RegisteredSchemaIsTheGeneratedOne) {
  const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow("tileops::norm_rms_norm_fwd", "");
  std::ostringstream os;
  os << handle.schema();
  EXPECT_EQ(os.str(),
            "tileops::norm_rms_norm_fwd(Tensor x, Tensor? weight, SymInt[] normalized_shape, float? eps=None, *, "
            "str? target=None) -> Tensor");
  for (auto key : {c10::DispatchKey::Meta, c10::DispatchKey::CUDA, c10::DispatchKey::CompositeExplicitAutograd,
                   c10::DispatchKey::Autograd})
    EXPECT_TRUE(handle.hasKernelForDispatchKey(key)) << key;
}

// The generated typed view reads each argument by name at its manifest place, without copies.
TEST(Codegen, ViewReadsArgumentsByName) {
  namespace op = tileops::ops::norm_rms_norm_fwd;
  const at::Tensor x = at::ones({2, 4}), w = at::ones({4}), y = at::empty({2, 4});
  const int64_t ns[] = {4};
  const at::Tensor with_weight[] = {x, w}, without_weight[] = {x, at::Tensor()};
  const at::Tensor outs[] = {y};
  const tileops::ParamValue eps_set[] = {tileops::ParamValue::ints(ns), tileops::ParamValue::real(1e-3)};
  const tileops::ParamValue eps_none[] = {tileops::ParamValue::ints(ns), tileops::ParamValue()};

  const tileops::OpCall a{op::kId, op::kName, x.device(), with_weight, outs, eps_set};
  const op::View va(a);
  EXPECT_EQ(&va.x(), &with_weight[0]);  // a reference into the call, not a copy
  ASSERT_NE(va.weight(), nullptr);
  EXPECT_EQ(va.weight(), &with_weight[1]);
  EXPECT_EQ(&va.y(), &outs[0]);
  EXPECT_EQ(va.normalized_shape(), c10::IntArrayRef(ns));
  EXPECT_EQ(va.eps(), std::optional<double>(1e-3));

  const tileops::OpCall b{op::kId, op::kName, x.device(), without_weight, outs, eps_none};
  const op::View vb(b);
  EXPECT_EQ(vb.weight(), nullptr);  // an absent optional input
  EXPECT_EQ(vb.eps(), std::nullopt);  // a None param
}

// A family's shared view holds what every op of the family has at the same place, alike.
TEST(Codegen, FamilyViewSharesTheCommonArguments) {
  namespace gelu = tileops::ops::activation_gelu_fwd;
  namespace swiglu = tileops::ops::activation_silu_and_mul_fwd;
  const at::Tensor x = at::ones({2, 8}), y = at::empty({2, 8});
  const at::Tensor ins[] = {x}, outs[] = {y};
  const tileops::ParamValue tanh[] = {tileops::ParamValue::string("tanh")};
  const tileops::OpCall g{gelu::kId, gelu::kName, x.device(), ins, outs, tanh};
  const tileops::OpCall s{swiglu::kId, swiglu::kName, x.device(), ins, outs, {}};
  EXPECT_EQ(&tileops::ops::family::activation::View(g).x(), &ins[0]);
  EXPECT_EQ(&tileops::ops::family::activation::View(s).y(), &outs[0]);
  EXPECT_EQ(gelu::View(g).approximate(), "tanh");
  // reduction: softmax's view reads its int dim by name (log_softmax's slots are the same).
  const tileops::ParamValue dim[] = {tileops::ParamValue::integer(-1)};
  const tileops::OpCall r{tileops::ops::reduction_softmax_fwd::kId, "tileops::reduction_softmax_fwd", x.device(),
                          ins, outs, dim};
  EXPECT_EQ(tileops::ops::reduction_softmax_fwd::View(r).dim(), -1);
}

// The code generated for RMSNormFwdOp, seen from C++: op table, compile_op_names, registered schema.
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include "tileops/ops.h"
#include "tileops_generated/ops.h"

TEST(Codegen, OpTableHoldsRmsNorm) {
  const tileops::OpInfo* op = tileops::find_op("RMSNormFwdOp");
  ASSERT_NE(op, nullptr);
  EXPECT_STREQ(op->family, "norm");
  EXPECT_STREQ(op->name, "norm_rms_norm_fwd");
  EXPECT_STREQ(op->ref_api, "torch.nn.functional.rms_norm");
  EXPECT_TRUE(op->has_boundary);
  ASSERT_EQ(op->num_operators, 1);
  EXPECT_STREQ(op->operators[0], "tileops::norm_rms_norm_fwd");
  EXPECT_EQ(tileops::compile_op_names("RMSNormFwdOp"), std::vector<std::string>{"tileops::norm_rms_norm_fwd"});
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

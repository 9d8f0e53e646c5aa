// Every specialisation of the activation kernels (unary and gated; 4 activations; 3 dtypes; every
// access width; sigmoid from each of its 9 x dtypes; QuickGELU and the gated ops with another
// layout or scalars) compiles with NVRTC to CUBIN for sm_80 and sm_90a (no GPU needed), and the
// access width follows the pointers' alignment, the gated row width and, for integer x, both
// element sizes; small launches spread over the SMs.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/activation/activation.h"

namespace {

using tileops::nvrtc::Act;
using tileops::nvrtc::GateLayout;
using ActivationPlan = tileops::nvrtc::ActivationSpec;
using tileops::nvrtc::activation_vec;

class ActivationCompiles
    : public ::testing::TestWithParam<std::tuple<c10::ScalarType, Act, bool, const char*>> {};

TEST_P(ActivationCompiles, EveryAccessWidthToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [dtype, act, gated, arch] = GetParam();
  const int widest = 16 / static_cast<int>(c10::elementSize(dtype));
  for (int vec = 1; vec <= widest; vec *= 2) {
    const ActivationPlan p{dtype, act, gated, vec};
    const auto src = tileops::nvrtc::activation_source(p, arch);
    const auto cubin = tileops::jit::compile_to_cubin(src);
    ASSERT_GT(cubin.image.size(), 4u) << src.name;
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << src.name;
    EXPECT_NE(cubin.lowered_name.find(gated ? "gated_fwd" : "unary_fwd"), std::string::npos) << src.name;
    EXPECT_NE(src.name.find(arch), std::string::npos);
  }
}

std::string ParamName(const ::testing::TestParamInfo<ActivationCompiles::ParamType>& info) {
  static const char* acts[] = {"relu", "silu", "gelu", "gelu_tanh"};
  const bool gated = std::get<2>(info.param);
  return std::string(c10::toString(std::get<0>(info.param))) + "_" + acts[static_cast<int>(std::get<1>(info.param))] +
         (gated ? "_and_mul_" : "_") + std::get<3>(info.param);
}

INSTANTIATE_TEST_SUITE_P(
    All, ActivationCompiles,
    ::testing::Combine(::testing::Values(c10::kHalf, c10::kBFloat16, c10::kFloat),
                       ::testing::Values(Act::Relu, Act::Silu, Act::Gelu, Act::GeluTanh), ::testing::Bool(),
                       ::testing::Values("sm_80", "sm_90a")),
    ParamName);

// QuickGeluFwdOp (unary_fwd) and MulAndSilu, FatreluAndMul, SwigluOAIAndMul (gated_layout_fwd), at
// every access width.
struct Variant {
  const char* name;
  Act act;
  bool gated;
  GateLayout layout;
};
const Variant kVariants[] = {{"quick_gelu", Act::QuickGelu, false, GateLayout::First},
                             {"mul_and_silu", Act::Silu, true, GateLayout::Second},
                             {"fatrelu_and_mul", Act::FatRelu, true, GateLayout::First},
                             {"swiglu_oai_and_mul", Act::SwigluOai, true, GateLayout::Interleaved}};

class VariantCompiles : public ::testing::TestWithParam<std::tuple<c10::ScalarType, int, const char*>> {};

TEST_P(VariantCompiles, EveryAccessWidthToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [dtype, index, arch] = GetParam();
  const Variant& v = kVariants[index];
  for (int vec = 1; vec <= 16 / static_cast<int>(c10::elementSize(dtype)); vec *= 2) {
    const ActivationPlan p{dtype, v.act, v.gated, vec, c10::ScalarType::Undefined, v.layout};
    const auto src = tileops::nvrtc::activation_source(p, arch);
    const auto cubin = tileops::jit::compile_to_cubin(src);
    ASSERT_GT(cubin.image.size(), 4u) << src.name;
    EXPECT_NE(cubin.lowered_name.find(v.gated ? "gated_layout_fwd" : "unary_fwd"), std::string::npos) << src.name;
  }
}

INSTANTIATE_TEST_SUITE_P(All, VariantCompiles,
                         ::testing::Combine(::testing::Values(c10::kHalf, c10::kBFloat16, c10::kFloat),
                                            ::testing::Range(0, 4), ::testing::Values("sm_80", "sm_90a")),
                         [](const auto& info) {
                           return std::string(c10::toString(std::get<0>(info.param))) + "_" +
                                  kVariants[std::get<1>(info.param)].name + "_" + std::get<2>(info.param);
                         });

TEST(ActivationPlan, OnlyTheNewGatedOpsTakeTheLayoutKernel) {
  // The [gate | up] act(gate) * up ops keep gated_fwd (names and template arguments unchanged).
  for (Act a : {Act::Silu, Act::Gelu, Act::GeluTanh}) {
    const ActivationPlan p{c10::kBFloat16, a, true, 8};
    EXPECT_FALSE(p.layout_kernel());
    EXPECT_EQ(tileops::nvrtc::activation_source(p, "sm_90a").name_expression.rfind("tileops::gated_fwd<", 0), 0u);
  }
  const ActivationPlan mul_silu{c10::kBFloat16, Act::Silu, true, 8, c10::ScalarType::Undefined, GateLayout::Second};
  EXPECT_TRUE(mul_silu.layout_kernel());
  EXPECT_EQ(tileops::nvrtc::activation_name(mul_silu, "sm_90a"), "gated_fwd__silu_up_gate__bf16__v8__sm_90a");
  EXPECT_EQ(tileops::nvrtc::activation_source(mul_silu, "sm_90a").name_expression,
            "tileops::gated_layout_fwd<tileops::bf16, 1, 1, 8, 4>");
  const ActivationPlan oai{c10::kHalf, Act::SwigluOai, true, 8, c10::ScalarType::Undefined, GateLayout::Interleaved};
  EXPECT_EQ(tileops::nvrtc::activation_name(oai, "sm_90a"), "gated_fwd__swiglu_oai_interleaved__f16__v8__sm_90a");
  const ActivationPlan fatrelu{c10::kFloat, Act::FatRelu, true, 4};
  EXPECT_TRUE(fatrelu.layout_kernel());  // [gate | up], but a threshold to pass
  EXPECT_FALSE(mul_silu == (ActivationPlan{c10::kBFloat16, Act::Silu, true, 8}));  // layout is part of the identity
  EXPECT_NE(mul_silu.hash(), (ActivationPlan{c10::kBFloat16, Act::Silu, true, 8}).hash());
}

// SigmoidFwdOp: x of every dtype its manifest takes, y = promote_int_to_float(x): the unary kernel with
// different load and store types (int32 -> float32 among them), at the widest step and at one element.
class SigmoidCompiles : public ::testing::TestWithParam<std::tuple<c10::ScalarType, const char*>> {};

TEST_P(SigmoidCompiles, IntegerToFloatToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [x_dtype, arch] = GetParam();
  const c10::ScalarType y_dtype = c10::isFloatingType(x_dtype) ? x_dtype : c10::kFloat;
  const int ei = static_cast<int>(c10::elementSize(x_dtype)), eo = static_cast<int>(c10::elementSize(y_dtype));
  for (int vec : {std::max(16 / ei, 16 / eo), 1}) {
    const ActivationPlan p{x_dtype, Act::Sigmoid, false, vec,
                           y_dtype == x_dtype ? c10::ScalarType::Undefined : y_dtype};
    const auto src = tileops::nvrtc::activation_source(p, arch);
    const auto cubin = tileops::jit::compile_to_cubin(src);
    ASSERT_GT(cubin.image.size(), 4u) << src.name;
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << src.name;
    EXPECT_NE(cubin.lowered_name.find("unary_fwd"), std::string::npos) << src.name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, SigmoidCompiles,
                         ::testing::Combine(::testing::Values(c10::kInt, c10::kByte, c10::kChar, c10::kShort, c10::kLong,
                                                              c10::kBool, c10::kHalf, c10::kBFloat16, c10::kFloat),
                                            ::testing::Values("sm_80", "sm_90a")),
                         [](const auto& info) {
                           return std::string(c10::toString(std::get<0>(info.param))) + "_" + std::get<1>(info.param);
                         });

TEST(SigmoidPlan, Int32ToFloat32IsItsOwnNamedSpecialisation) {
  const ActivationPlan p{c10::kInt, Act::Sigmoid, false, 4, c10::kFloat};
  EXPECT_EQ(tileops::nvrtc::activation_name(p, "sm_90a"), "unary_fwd__sigmoid__i32_f32__v4__sm_90a");
  const auto src = tileops::nvrtc::activation_source(p, "sm_90a");
  EXPECT_NE(src.name_expression.find("tileops::unary_fwd<int, float, 4, 4, 4>"), std::string::npos)
      << src.name_expression;
  // Same-dtype ops keep their names and template arguments (x and y types equal).
  const ActivationPlan silu{c10::kBFloat16, Act::Silu, false, 8};
  EXPECT_EQ(tileops::nvrtc::activation_name(silu, "sm_90a"), "unary_fwd__silu__bf16__v8__sm_90a");
  EXPECT_NE(tileops::nvrtc::activation_source(silu, "sm_90a").name_expression.find(
                "tileops::unary_fwd<tileops::bf16, tileops::bf16, 1, 8, 4>"),
            std::string::npos);
}

const void* at_offset(uintptr_t bytes) { return reinterpret_cast<const void*>(bytes); }

TEST(SigmoidPlan, StepIsOneSixteenByteStoreOfY) {
  using tileops::nvrtc::unary_vec;
  // Same dtype: exactly activation_vec.
  EXPECT_EQ(unary_vec(c10::kBFloat16, c10::kBFloat16, at_offset(4096), at_offset(8192)), 8);
  EXPECT_EQ(unary_vec(c10::kHalf, c10::kHalf, at_offset(4096 + 8), at_offset(8192)), 4);
  // int32 -> float32: 4 a step, one 16-byte load and store.
  EXPECT_EQ(unary_vec(c10::kInt, c10::kFloat, at_offset(4096), at_offset(8192)), 4);
  // uint8 -> float32: 4 a step (a 4-byte load, one 16-byte store), not 16 (four stores a step).
  EXPECT_EQ(unary_vec(c10::kByte, c10::kFloat, at_offset(4096), at_offset(8192)), 4);
  EXPECT_EQ(unary_vec(c10::kBool, c10::kFloat, at_offset(4096 + 4), at_offset(8192)), 4);  // x 4-byte aligned
  EXPECT_EQ(unary_vec(c10::kChar, c10::kFloat, at_offset(4096 + 1), at_offset(8192)), 1);  // x one byte off
  // int64 -> float32: 4 a step (two 16-byte loads, one 16-byte store); x 8-byte aligned: one element.
  EXPECT_EQ(unary_vec(c10::kLong, c10::kFloat, at_offset(4096), at_offset(8192)), 4);
  EXPECT_EQ(unary_vec(c10::kLong, c10::kFloat, at_offset(4096 + 8), at_offset(8192)), 1);
  // int16 -> float32 with y only 8-byte aligned (an out buffer could be): stores of 2 floats.
  EXPECT_EQ(unary_vec(c10::kShort, c10::kFloat, at_offset(4096), at_offset(8192 + 8)), 2);
}

TEST(ActivationPlan, AccessWidthFollowsAlignment) {
  EXPECT_EQ(activation_vec(c10::kBFloat16, 0, {at_offset(4096), at_offset(8192)}), 8);
  EXPECT_EQ(activation_vec(c10::kFloat, 0, {at_offset(4096), at_offset(8192)}), 4);
  EXPECT_EQ(activation_vec(c10::kHalf, 0, {at_offset(4096 + 2), at_offset(8192)}), 1);  // x one element off
  EXPECT_EQ(activation_vec(c10::kHalf, 0, {at_offset(4096), at_offset(8192 + 8)}), 4);  // y 8-byte aligned
  EXPECT_EQ(activation_vec(c10::kFloat, 0, {at_offset(4096 + 4), at_offset(4096 + 4)}), 1);
}

TEST(ActivationPlan, GatedAccessWidthDividesTheRow) {
  EXPECT_EQ(activation_vec(c10::kBFloat16, 14336, {at_offset(4096), at_offset(8192)}), 8);
  EXPECT_EQ(activation_vec(c10::kBFloat16, 12, {at_offset(4096), at_offset(8192)}), 4);
  EXPECT_EQ(activation_vec(c10::kBFloat16, 7, {at_offset(4096), at_offset(8192)}), 1);  // odd d
  EXPECT_EQ(activation_vec(c10::kFloat, 6, {at_offset(4096), at_offset(8192)}), 2);
}

TEST(ActivationPlan, SmallLaunchesSpreadOverTheSms) {
  using tileops::nvrtc::activation_launch;
  auto launch = [](long long vecs, long long cap = 1LL << 40) {
    const auto at = activation_launch(vecs, 132, cap);
    return std::make_pair(at.grid, at.threads);
  };
  // 1 x 28672 bf16 gated (decode): 1792 16-byte outputs, two CTAs of four trips -> 14 of one.
  EXPECT_EQ(launch(1792), std::make_pair(14LL, 128));
  EXPECT_EQ(launch(200 * 256), std::make_pair(132LL, 128));     // 50 CTAs of four -> the SMs, small CTAs
  EXPECT_EQ(launch(132 * 1024), std::make_pair(132LL, 256));    // a CTA an SM of four a thread: as before
  EXPECT_EQ(launch(1000 * 1024), std::make_pair(1000LL, 256));
  EXPECT_EQ(launch(1000 * 1024, 264), std::make_pair(264LL, 256));  // the tuning cap still holds
  EXPECT_EQ(launch(1), std::make_pair(1LL, 128));
  EXPECT_EQ(launch(0), std::make_pair(1LL, 128));
}

TEST(ActivationPlan, NamesAreReadableAndDistinct) {
  const std::string a = tileops::nvrtc::activation_name({c10::kBFloat16, Act::Silu, true, 8}, "sm_90a");
  EXPECT_EQ(a, "gated_fwd__silu__bf16__v8__sm_90a");
  EXPECT_NE(a, tileops::nvrtc::activation_name({c10::kBFloat16, Act::Silu, false, 8}, "sm_90a"));
  EXPECT_NE(tileops::nvrtc::activation_name({c10::kHalf, Act::Gelu, false, 8}, "sm_90a"),
            tileops::nvrtc::activation_name({c10::kHalf, Act::GeluTanh, false, 8}, "sm_90a"));
}

}  // namespace

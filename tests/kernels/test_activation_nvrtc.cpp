// Every specialisation of the activation kernels (unary and gated; 4 activations; 3 dtypes; every
// access width) compiles with NVRTC to CUBIN for sm_80 and sm_90a (no GPU needed), and the access
// width follows the pointers' alignment and the gated row width.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/activation_fwd.h"

namespace {

using tileops::nvrtc::Act;
using tileops::nvrtc::ActivationPlan;
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

const void* at_offset(uintptr_t bytes) { return reinterpret_cast<const void*>(bytes); }

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

TEST(ActivationPlan, NamesAreReadableAndDistinct) {
  const std::string a = tileops::nvrtc::activation_name({c10::kBFloat16, Act::Silu, true, 8}, "sm_90a");
  EXPECT_EQ(a, "gated_fwd__silu__bf16__v8__sm_90a");
  EXPECT_NE(a, tileops::nvrtc::activation_name({c10::kBFloat16, Act::Silu, false, 8}, "sm_90a"));
  EXPECT_NE(tileops::nvrtc::activation_name({c10::kHalf, Act::Gelu, false, 8}, "sm_90a"),
            tileops::nvrtc::activation_name({c10::kHalf, Act::GeluTanh, false, 8}, "sm_90a"));
}

}  // namespace

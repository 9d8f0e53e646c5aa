// The FP8QuantFwdOp kernel (src/kernels/quantization/fp8_quant_fwd.cuh) compiles with NVRTC to CUBIN
// for sm_80 and sm_90a in every specialisation its plan takes (no GPU needed): each dtype and access
// width, 1 to 32 threads a row, 1 to 8 accesses a thread in registers and the two-pass row; and the
// plan is a pure function of the problem.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/quantization/fp8_quant.h"
#include "nvrtc_compile_support.h"

namespace {

using tileops::test::facts_for;

using tileops::nvrtc::Fp8QuantFamily;
using tileops::nvrtc::Fp8QuantProblem;
using tileops::nvrtc::Fp8QuantSpec;

Fp8QuantSpec plan(const Fp8QuantProblem& q, const char* arch = "sm_90a") {
  return Fp8QuantFamily{}.plan(q, facts_for(arch), tileops::nvrtc::tuning());
}

TEST(Fp8QuantPlan, ThreadsAndRegistersFollowTheRowLength) {
  struct Case { int64_t vecs; int tpr, per_thread; };
  for (const Case c : {Case{1, 1, 1}, Case{3, 4, 1}, Case{8, 8, 1}, Case{32, 32, 1}, Case{33, 32, 2},
                       Case{256, 32, 8}, Case{257, 32, 0}, Case{1 << 20, 32, 0}, Case{int64_t{1} << 40, 32, 0}}) {
    const Fp8QuantSpec s = plan({c10::kBFloat16, 8, c.vecs});
    EXPECT_EQ(s.tpr, c.tpr) << c.vecs;
    EXPECT_EQ(s.per_thread, c.per_thread) << c.vecs;
    EXPECT_EQ(s.vec, 8);
    EXPECT_EQ(s, plan({c10::kBFloat16, 8, c.vecs}));
  }
}

class Fp8QuantCompiles : public ::testing::TestWithParam<std::tuple<c10::ScalarType, const char*>> {};

TEST_P(Fp8QuantCompiles, EverySpecialisationToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [dtype, arch] = GetParam();
  const int widest = 16 / static_cast<int>(c10::elementSize(dtype));
  std::set<std::string> names;
  for (int vec = 1; vec <= widest; vec *= 2)
    for (int64_t vecs : {1, 2, 4, 8, 16, 32, 64, 96, 128, 160, 192, 224, 256, 257}) {
      const auto sources = plan({dtype, vec, vecs}, arch).sources();
      ASSERT_EQ(sources.size(), 1u);
      if (!names.insert(sources[0].name).second) continue;
      const auto cubin = tileops::jit::compile_to_cubin(sources[0]);
      ASSERT_GT(cubin.image.size(), 4u) << sources[0].name;
      EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << sources[0].name;
      EXPECT_NE(cubin.lowered_name.find("fp8_quant_fwd"), std::string::npos) << cubin.lowered_name;
      EXPECT_NE(sources[0].name.find(arch), std::string::npos);
    }
  EXPECT_EQ(names.size(), static_cast<size_t>(14 * (widest == 8 ? 4 : 3)));
}

INSTANTIATE_TEST_SUITE_P(All, Fp8QuantCompiles,
                         ::testing::Combine(::testing::Values(c10::kHalf, c10::kBFloat16, c10::kFloat),
                                            ::testing::Values("sm_80", "sm_90a")),
                         [](const auto& info) {
                           return std::string(tileops::nvrtc::short_type_name(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace

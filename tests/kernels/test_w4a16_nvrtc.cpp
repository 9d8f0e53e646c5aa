// The W4A16 decode kernel (src/kernels/gemm/w4a16_fwd.cuh) compiles with NVRTC to CUBIN for sm_80 and
// sm_90a (no GPU needed) without register spills for every row tile and dtype; the plan takes decode-sized
// shapes only and declines the rest. So does the dequantising kernel the cublaslt target runs
// before its GEMM (src/kernels/gemm/w4a16_dequant.cuh), for the shapes it takes.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/gemm/w4a16.h"
#include "nvrtc_compile_support.h"

namespace {

using tileops::test::strict;
using tileops::test::facts_for;

using tileops::nvrtc::w4a16_m_tiles;

TEST(W4A16Plan, RowTilesForDecodeShapesOnly) {
  EXPECT_EQ(w4a16_m_tiles(c10::kHalf, 1, 8192, 128, true), 1);
  EXPECT_EQ(w4a16_m_tiles(c10::kBFloat16, 8, 8192, 128, true), 1);
  EXPECT_EQ(w4a16_m_tiles(c10::kHalf, 9, 8192, 128, true), 2);
  EXPECT_EQ(w4a16_m_tiles(c10::kHalf, 33, 96, 32, true), 8);
  EXPECT_EQ(w4a16_m_tiles(c10::kHalf, 64, 8192, 128, true), 8);
  EXPECT_EQ(w4a16_m_tiles(c10::kHalf, 65, 8192, 128, true), 0);    // a prefill: declined
  EXPECT_EQ(w4a16_m_tiles(c10::kHalf, 1, 200, 40, true), 0);       // K % 32 != 0
  EXPECT_EQ(w4a16_m_tiles(c10::kHalf, 1, 256, 16, true), 0);       // a lane's 32 values span two groups
  EXPECT_EQ(w4a16_m_tiles(c10::kHalf, 1, 8192, 128, false), 0);    // unaligned views
  EXPECT_EQ(w4a16_m_tiles(c10::kFloat, 1, 8192, 128, true), 0);
  EXPECT_EQ(w4a16_m_tiles(c10::kHalf, 0, 8192, 128, true), 0);
  const auto kernel = tileops::nvrtc::w4a16_plan({c10::kHalf, 2}, facts_for("sm_90a"));
  EXPECT_EQ(kernel.m_tiles, 2);
  EXPECT_EQ(kernel.warps, tileops::nvrtc::kW4A16Warps);
  EXPECT_EQ(kernel.sources().size(), 1u);
  tileops::nvrtc::DeviceFacts turing = facts_for("sm_75");
  turing.cc_major = 7, turing.cc_minor = 5;
  EXPECT_EQ(tileops::nvrtc::w4a16_plan({c10::kHalf, 2}, turing).m_tiles, 0);  // no m16n8k16 MMA there
  EXPECT_TRUE(tileops::nvrtc::w4a16_plan({c10::kHalf, 0}, facts_for("sm_90a")).sources().empty());
}

TEST(W4A16Compiles, EveryRowTileAndDtypeToCubinWithoutSpills) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  std::set<std::string> names;
  for (const char* arch : {"sm_80", "sm_90a"})
    for (c10::ScalarType dtype : {c10::kHalf, c10::kBFloat16})
      for (int tiles : {1, 2, 4, 8}) {
        const auto sources = tileops::nvrtc::w4a16_plan({dtype, tiles}, facts_for(arch)).sources();
        ASSERT_EQ(sources.size(), 1u);
        const auto cubin = tileops::jit::compile_to_cubin(strict(sources[0]));
        ASSERT_GT(cubin.image.size(), 4u) << sources[0].name;
        EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << sources[0].name;
        names.insert(sources[0].name);
      }
  EXPECT_EQ(names.size(), 16u);
}

TEST(W4A16Dequant, TakesWholeWordsOfOneGroup) {
  using tileops::nvrtc::w4a16_dequant_applies;
  EXPECT_TRUE(w4a16_dequant_applies(c10::kHalf, 8192, 128, true, 90));
  EXPECT_TRUE(w4a16_dequant_applies(c10::kBFloat16, 96, 8, true, 80));
  EXPECT_FALSE(w4a16_dequant_applies(c10::kHalf, 100, 4, true, 90));     // a word spans two groups
  EXPECT_FALSE(w4a16_dequant_applies(c10::kHalf, 204, 12, true, 90));    // K % 8 != 0
  EXPECT_FALSE(w4a16_dequant_applies(c10::kHalf, 8192, 128, false, 90));  // packed weight not 4-byte aligned
  EXPECT_FALSE(w4a16_dequant_applies(c10::kBFloat16, 8192, 128, true, 75));  // no bf16x2 fma before sm_80
  EXPECT_FALSE(w4a16_dequant_applies(c10::kFloat, 8192, 128, true, 90));
}

TEST(W4A16Dequant, CompilesToCubinWithoutSpills) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  for (const char* arch : {"sm_80", "sm_90a"})
    for (c10::ScalarType dtype : {c10::kHalf, c10::kBFloat16}) {
      const auto src = tileops::nvrtc::w4a16_dequant_source(dtype, arch);
      const auto cubin = tileops::jit::compile_to_cubin(strict(src));
      EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << src.name;
    }
}

}  // namespace

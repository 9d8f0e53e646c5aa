// The serving forms of the RMSNorm rows (a float32 weight beside a 16-bit row, the Gemma 1 + w form)
// compile with NVRTC for sm_80 and sm_90a, take only the register and streaming rows, and leave the
// same-dtype kernels' instantiation as it was; the quantised-output rows (int8, float8_e4m3fn; static
// and dynamic scales) compile too and are register rows only.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/norm/row_norm.h"
#include "targets/nvrtc/nvrtc_target.h"

namespace {

using tileops::nvrtc::RowNormImpl;
using tileops::nvrtc::RowNormOp;
using tileops::nvrtc::RowNormProblem;
using tileops::nvrtc::RowNormQuant;
using tileops::nvrtc::RowNormSpec;

RowNormSpec plan(RowNormOp op, c10::ScalarType dtype, int64_t n, bool float_weight, bool gemma,
                 const char* device = "h200", int max_vec = 16) {
  RowNormProblem q{op, dtype, n, max_vec, true};
  q.float_weight = float_weight;
  q.gemma = gemma;
  return tileops::nvrtc::plan_row_norm(q, tileops::nvrtc::named_device_facts(device));
}

struct Case {
  RowNormOp op;
  c10::ScalarType dtype;
  int64_t n;
  bool float_weight, gemma;
};

class ServingRowsCompile : public ::testing::TestWithParam<std::tuple<Case, const char*>> {};

TEST_P(ServingRowsCompile, ToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [c, device] = GetParam();
  const RowNormSpec s = plan(c.op, c.dtype, c.n, c.float_weight, c.gemma, device);
  const auto src = s.sources()[0];
  if (c.float_weight) EXPECT_NE(src.name_expression.find(", float, "), std::string::npos) << src.name_expression;
  EXPECT_NE(src.name_expression.find(c.gemma ? "true>" : "false>"), std::string::npos) << src.name_expression;
  const auto cubin = tileops::jit::compile_to_cubin(src);
  ASSERT_GT(cubin.image.size(), 4u);
  EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
}

INSTANTIATE_TEST_SUITE_P(
    Devices, ServingRowsCompile,
    ::testing::Combine(
        ::testing::Values(Case{RowNormOp::kRmsNorm, c10::kBFloat16, 3584, false, true},        // Gemma, bf16 weight
                          Case{RowNormOp::kRmsNorm, c10::kHalf, 4096, true, true},             // Gemma, f32 weight
                          Case{RowNormOp::kFusedAddRmsNorm, c10::kBFloat16, 8192, true, false}, // f32 weight
                          Case{RowNormOp::kFusedAddRmsNorm, c10::kBFloat16, 1 << 20, true, true},  // streaming
                          Case{RowNormOp::kFusedAddRmsNorm, c10::kFloat, 4096, false, true},
                          Case{RowNormOp::kRmsNorm, c10::kBFloat16, 128, true, true}),           // QK-norm shape
        ::testing::Values("a100", "h200")));

TEST(ServingRowsPlan, NeverStagedOrClustered) {
  // Rows the plain weight sends to the staged or cluster kernels on an H200.
  for (auto [op, n] : {std::pair{RowNormOp::kRmsNorm, int64_t{8192}}, std::pair{RowNormOp::kRmsNorm, int64_t{131072}},
                       std::pair{RowNormOp::kFusedAddRmsNorm, int64_t{16384}}}) {
    {
      const RowNormSpec plain = plan(op, c10::kBFloat16, n, false, false);
      EXPECT_TRUE(plain.impl == RowNormImpl::kStaged || plain.impl == RowNormImpl::kCluster) << n;
      for (auto [fw, gemma] : {std::pair{true, false}, std::pair{false, true}, std::pair{true, true}}) {
        const RowNormSpec s = plan(op, c10::kBFloat16, n, fw, gemma);
        EXPECT_TRUE(s.impl == RowNormImpl::kRegisterResident || s.impl == RowNormImpl::kStreaming) << s.describe();
        EXPECT_FALSE(s.staged);
        EXPECT_EQ(s.cluster, 1);
      }
    }
  }
}

TEST(ServingRowsPlan, NameAndIdentityCarryTheWeightForm) {
  const RowNormSpec plain = plan(RowNormOp::kRmsNorm, c10::kBFloat16, 4096, false, false);
  const RowNormSpec f32 = plan(RowNormOp::kRmsNorm, c10::kBFloat16, 4096, true, false);
  const RowNormSpec gemma = plan(RowNormOp::kRmsNorm, c10::kBFloat16, 4096, false, true);
  EXPECT_NE(f32.name().find("_wf32"), std::string::npos) << f32.name();
  EXPECT_NE(gemma.name().find("_gemma"), std::string::npos) << gemma.name();
  EXPECT_EQ(plain.name().find("_wf32"), std::string::npos);
  EXPECT_FALSE(plain == f32);
  EXPECT_FALSE(plain == gemma);
  EXPECT_FALSE(f32 == gemma);
  // The same-dtype kernel keeps its template arguments (its instantiation and SASS are unchanged).
  EXPECT_EQ(plain.template_expression(), "tileops::rms_norm_fwd<tileops::bf16, 4096, 8, 128, 1, true, true>");
  EXPECT_EQ(f32.template_expression(),
            "tileops::rms_norm_fwd<tileops::bf16, 4096, 8, 128, 1, true, true, float, false>");
}

// A call of few rows (decode) spreads each row over more threads: at most two vectors a thread, so
// the register kernel loads a float32 weight with x (its prefetch holds 64 bytes of weight a thread).
TEST(ServingRowsPlan, FewRowsSpreadWiderSoTheWeightLoadsWithX) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto facts = tileops::nvrtc::named_device_facts("h200");
  for (auto [op, n] : {std::pair{RowNormOp::kRmsNorm, int64_t{3584}}, std::pair{RowNormOp::kFusedAddRmsNorm, int64_t{4096}},
                       std::pair{RowNormOp::kFusedAddRmsNorm, int64_t{8192}}}) {
    RowNormProblem q{op, c10::kBFloat16, n, 16, true};
    q.float_weight = true;
    q.gemma = op == RowNormOp::kRmsNorm;
    const RowNormSpec many = tileops::nvrtc::plan_row_norm(q, facts);
    q.few_rows = true;
    const RowNormSpec few = tileops::nvrtc::plan_row_norm(q, facts);
    ASSERT_EQ(few.impl, RowNormImpl::kRegisterResident) << few.describe();
    const int64_t vecs = n / few.vec;
    const int64_t few_per_thread = (vecs + few.tpr - 1) / few.tpr, many_per_thread = (vecs + many.tpr - 1) / many.tpr;
    EXPECT_LE(few_per_thread * few.vec * 4, 64) << few.describe();
    EXPECT_GT(many_per_thread * many.vec * 4, 64) << many.describe();
    EXPECT_GT(few.tpr, many.tpr);
    EXPECT_FALSE(few == many);
    EXPECT_NE(few.name(), many.name());
    const auto cubin = tileops::jit::compile_to_cubin(few.sources()[0]);
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << few.describe();
  }
  // The problem's identity carries the flag; LayerNorm and the quantised rows keep one layout.
  RowNormProblem a{RowNormOp::kRmsNorm, c10::kBFloat16, 4096, 16, true}, b = a;
  b.few_rows = true;
  EXPECT_FALSE(a == b);
  for (RowNormProblem q : {RowNormProblem{RowNormOp::kLayerNorm, c10::kBFloat16, 2048, 16, true, true},
                           RowNormProblem{RowNormOp::kRmsNorm, c10::kBFloat16, 4096, 16, true}}) {
    if (q.op == RowNormOp::kRmsNorm) q.quant = RowNormQuant::kDynamic;
    RowNormProblem f = q;
    f.few_rows = true;
    EXPECT_EQ(tileops::nvrtc::plan_row_norm(q, facts).tpr, tileops::nvrtc::plan_row_norm(f, facts).tpr);
  }
}

TEST(ServingRowsPlan, LayerNormHasNoGemmaOrQuantisedForm) {
  RowNormProblem q{RowNormOp::kLayerNorm, c10::kBFloat16, 4096, 16, true};
  q.float_weight = true;  // taken (LayerNormFloatWeight tests it)
  EXPECT_NO_THROW(tileops::nvrtc::plan_row_norm(q, tileops::nvrtc::named_device_facts("h200")));
  q.gemma = true;
  EXPECT_THROW(tileops::nvrtc::plan_row_norm(q, tileops::nvrtc::named_device_facts("h200")), c10::Error);
  q.gemma = false;
  q.quant = RowNormQuant::kStatic;
  EXPECT_THROW(tileops::nvrtc::plan_row_norm(q, tileops::nvrtc::named_device_facts("h200")), c10::Error);
}

RowNormSpec plan_quant(RowNormOp op, c10::ScalarType dtype, int64_t n, RowNormQuant quant, c10::ScalarType qdtype,
                       const char* device = "h200") {
  RowNormProblem q{op, dtype, n, 16, true};
  q.quant = quant;
  q.qdtype = qdtype;
  return tileops::nvrtc::plan_row_norm(q, tileops::nvrtc::named_device_facts(device));
}

struct QuantCase {
  RowNormOp op;
  c10::ScalarType dtype;
  int64_t n;
  RowNormQuant quant;
  c10::ScalarType qdtype;
};

class QuantRowsCompile : public ::testing::TestWithParam<std::tuple<QuantCase, const char*>> {};

TEST_P(QuantRowsCompile, ToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const auto& [c, device] = GetParam();
  const RowNormSpec s = plan_quant(c.op, c.dtype, c.n, c.quant, c.qdtype, device);
  EXPECT_EQ(s.impl, RowNormImpl::kRegisterResident);
  EXPECT_TRUE(s.cache);
  const auto src = s.sources()[0];
  EXPECT_NE(src.name_expression.find("_quant_fwd<"), std::string::npos) << src.name_expression;
  EXPECT_NE(src.name_expression.find(c.qdtype == c10::kChar ? "signed char" : "tileops::fp8_e4m3"), std::string::npos);
  const auto cubin = tileops::jit::compile_to_cubin(src);
  ASSERT_GT(cubin.image.size(), 4u);
  EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF"));
}

INSTANTIATE_TEST_SUITE_P(
    Devices, QuantRowsCompile,
    ::testing::Combine(
        ::testing::Values(
            QuantCase{RowNormOp::kRmsNorm, c10::kBFloat16, 4096, RowNormQuant::kStatic, c10::kFloat8_e4m3fn},
            QuantCase{RowNormOp::kRmsNorm, c10::kHalf, 8192, RowNormQuant::kDynamic, c10::kChar},  // 256 threads
            QuantCase{RowNormOp::kFusedAddRmsNorm, c10::kBFloat16, 4096, RowNormQuant::kDynamic, c10::kFloat8_e4m3fn},
            QuantCase{RowNormOp::kFusedAddRmsNorm, c10::kFloat, 1000, RowNormQuant::kStatic, c10::kChar},  // vec 4, ragged
            QuantCase{RowNormOp::kRmsNorm, c10::kBFloat16, 32768, RowNormQuant::kDynamic, c10::kFloat8_e4m3fn},  // 1024 threads
            QuantCase{RowNormOp::kRmsNorm, c10::kBFloat16, 128, RowNormQuant::kDynamic, c10::kChar}),  // rows of 16 threads
        ::testing::Values("a100", "h200")));

TEST(QuantRowsPlan, RegisterRowsOnlyAndTheOthersUnchanged) {
  // 8192 bf16 rows go to the staged kernel with a plain output; the quantised ones stay in registers.
  const RowNormSpec s = plan_quant(RowNormOp::kRmsNorm, c10::kBFloat16, 8192, RowNormQuant::kStatic, c10::kChar);
  EXPECT_EQ(s.impl, RowNormImpl::kRegisterResident);
  EXPECT_EQ(s.template_expression(), "tileops::rms_norm_quant_fwd<tileops::bf16, 8192, 8, 256, 1, signed char, false>");
  const RowNormSpec d =
      plan_quant(RowNormOp::kFusedAddRmsNorm, c10::kBFloat16, 8192, RowNormQuant::kDynamic, c10::kFloat8_e4m3fn);
  EXPECT_EQ(d.template_expression(),
            "tileops::fused_add_rms_norm_quant_fwd<tileops::bf16, 8192, 8, 256, 1, tileops::fp8_e4m3, true>");
  EXPECT_NE(d.name().find("_qdf8e4m3"), std::string::npos) << d.name();
  EXPECT_FALSE(s == plan_quant(RowNormOp::kRmsNorm, c10::kBFloat16, 8192, RowNormQuant::kStatic, c10::kFloat8_e4m3fn));
  EXPECT_FALSE(s == plan_quant(RowNormOp::kRmsNorm, c10::kBFloat16, 8192, RowNormQuant::kDynamic, c10::kChar));
  // Rows longer than registers hold (64 KB of x) are refused, naming the op and the limit.
  try {
    plan_quant(RowNormOp::kRmsNorm, c10::kBFloat16, 65536, RowNormQuant::kDynamic, c10::kChar);
    FAIL() << "a 128 KB row was planned";
  } catch (const c10::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tileops::norm_rms_norm_dynamic_quant_fwd: normalized_shape of 65536"), std::string::npos) << msg;
    EXPECT_NE(msg.find("65536 bytes a row"), std::string::npos) << msg;
  }
}

}  // namespace

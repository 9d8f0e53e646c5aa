// The elementwise engine without a GPU: the dim collapsing that picks a kernel's path (contiguous,
// broadcast single element, strided rank), the compute type rule, and every manifest entry's
// generated kernel compiling with NVRTC to CUBIN on every path (contiguous, strided, 8 a step, tiled;
// 32- and 64-bit indexing).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <limits>
#include <string>
#include <vector>

#include "boundary/checks.h"
#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/elementwise/elementwise.h"
#include "targets/nvrtc/kernel_sources.h"
#include "tileops/op_call.h"

namespace {

using tileops::nvrtc::EwLayout;
using tileops::nvrtc::EwSpec;
using tileops::nvrtc::ew_layout;
namespace ew = tileops::elementwise;

// The functor of an entry's expression case in the generated elementwise/exprs.cuh, as text.
std::string functor_of(int op, int variant) {
  const std::string name = std::string("struct ") + ew::kOps[op].stem + "__" + std::to_string(variant) + " {";
  for (const auto& f : tileops::nvrtc::kernel_files()) {
    if (std::string(f.name) != "elementwise/exprs.cuh") continue;
    const std::string text = f.text;
    const size_t at = text.find(name);
    return at == std::string::npos ? std::string() : text.substr(at, text.find("\n};", at) - at);
  }
  return {};
}

// The functor a spec's kernel instantiates (its name in the kernel's name expression).
bool instantiates(const EwSpec& s, int op, int variant) {
  const std::string functor = std::string("tileops::ew::expr::") + ew::kOps[op].stem + "__" + std::to_string(variant) + ",";
  return s.sources()[0].name_expression.find(functor) != std::string::npos;
}

EwLayout layout(std::vector<std::vector<int64_t>> sizes, std::vector<std::vector<int64_t>> strides,
                std::vector<int64_t> out) {
  std::vector<c10::IntArrayRef> s(sizes.begin(), sizes.end()), t(strides.begin(), strides.end());
  return ew_layout(s, t, out);
}

TEST(ElementwiseLayout, ContiguousInputsCollapseToOneDim) {
  const auto l = layout({{8, 16, 32}, {8, 16, 32}}, {{512, 32, 1}, {512, 32, 1}}, {8, 16, 32});
  EXPECT_TRUE(l.contiguous);
  EXPECT_EQ(std::vector<int64_t>(l.sizes.begin(), l.sizes.end()), (std::vector<int64_t>{4096}));
  EXPECT_EQ(l.numel, 4096);
  EXPECT_FALSE(l.one[0] || l.one[1]);
}

TEST(ElementwiseLayout, OuterBroadcastIsStridedRankTwo) {
  // [4096, 1] + [1, 4096]
  const auto l = layout({{4096, 1}, {1, 4096}}, {{1, 1}, {4096, 1}}, {4096, 4096});
  EXPECT_FALSE(l.contiguous);
  EXPECT_EQ(std::vector<int64_t>(l.sizes.begin(), l.sizes.end()), (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(std::vector<int64_t>(l.strides[0].begin(), l.strides[0].end()), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(std::vector<int64_t>(l.strides[1].begin(), l.strides[1].end()), (std::vector<int64_t>{0, 1}));
}

TEST(ElementwiseLayout, SingleElementInputStaysOnTheContiguousPath) {
  // x + tensor(2.0): a 0-dim input broadcasts as one element
  const auto l = layout({{64, 128}, {}}, {{128, 1}, {}}, {64, 128});
  EXPECT_TRUE(l.contiguous);
  EXPECT_TRUE(l.one[1]);
  EXPECT_FALSE(l.one[0]);
  EXPECT_EQ(std::vector<int64_t>(l.sizes.begin(), l.sizes.end()), (std::vector<int64_t>{8192}));
}

TEST(ElementwiseLayout, TransposedInputIsStridedAndSizeOneDimsDrop) {
  const auto l = layout({{64, 1, 32}, {64, 1, 32}}, {{1, 1, 64}, {32, 32, 1}}, {64, 1, 32});
  EXPECT_FALSE(l.contiguous);
  EXPECT_EQ(std::vector<int64_t>(l.sizes.begin(), l.sizes.end()), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(std::vector<int64_t>(l.strides[0].begin(), l.strides[0].end()), (std::vector<int64_t>{1, 64}));
  EXPECT_EQ(std::vector<int64_t>(l.strides[1].begin(), l.strides[1].end()), (std::vector<int64_t>{32, 1}));
}

TEST(ElementwiseLayout, RowBroadcastMergesInnerDimsOnly) {
  // [2, 3, 4] + [3, 4] (a bias over rows): the input dims merge, the broadcast one stays
  const auto l = layout({{2, 3, 4}, {3, 4}}, {{12, 4, 1}, {4, 1}}, {2, 3, 4});
  EXPECT_EQ(std::vector<int64_t>(l.sizes.begin(), l.sizes.end()), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(std::vector<int64_t>(l.strides[1].begin(), l.strides[1].end()), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(l.max_offset, 23);
}

int entry(const std::string& cls) {
  for (int i = 0; i < ew::kNumOps; ++i)
    if (cls == ew::kOps[i].cls) return i;
  return -1;
}

// The plan of AddFwdOp for CPU tensors of these layouts: it reads shapes, strides, dtypes and
// alignment only.
EwSpec add_plan(const at::Tensor& a, const at::Tensor& b) {
  const int add = entry("AddFwdOp");
  const std::vector<at::Tensor> in{a, b};
  const std::vector<at::Tensor> out{at::empty(at::infer_size(a.sizes(), b.sizes()), a.options())};
  const std::vector<tileops::ParamValue> params{tileops::ParamValue::real(1.0)};
  const tileops::OpCall call{0, "tileops::elementwise_add_fwd", c10::Device(c10::kCPU), in, out, params};
  return tileops::nvrtc::ew_problem(add, call);
}

TEST(ElementwisePlan, BiasRowAndOuterBroadcastStepEightElements) {
  const auto bf = at::TensorOptions().dtype(c10::kBFloat16);
  // x + bias: x read with vector loads, the bias row too (its row stride is 0)
  EwSpec s = add_plan(at::empty({256, 1024}, bf), at::empty({1024}, bf));
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.vec, 8);
  EXPECT_TRUE(s.aligned[0] && s.aligned[1]);
  EXPECT_FALSE(s.one[0] || s.one[1]);
  EXPECT_NE(s.name().find("__r2v8"), std::string::npos) << s.name();
  EXPECT_EQ(s.sources()[0].name_expression.rfind("tileops::ew::strided_vec_fwd<", 0), 0u);
  // [4096, 1] + [1, 4096]: the column is one element held for a group of 8
  s = add_plan(at::empty({4096, 1}, bf), at::empty({1, 4096}, bf));
  EXPECT_EQ(s.vec, 8);
  EXPECT_TRUE(s.one[0]);
  EXPECT_TRUE(s.aligned[1]);
  // rows of 514 sliced to 512 (misaligned rows): 8 a step, element loads for that input
  s = add_plan(at::empty({300, 514}, bf).slice(1, 1, 513), at::empty({300, 512}, bf));
  EXPECT_EQ(s.vec, 8);
  EXPECT_FALSE(s.aligned[0]);
  EXPECT_TRUE(s.aligned[1]);
}

TEST(ElementwisePlan, TransposedInputGoesThroughTiles) {
  const auto f = at::TensorOptions().dtype(c10::kFloat);
  EwSpec s = add_plan(at::empty({512, 384}, f).t(), at::empty({384, 512}, f));
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.vec, 2);  // even sizes: 2 elements a thread, each input read 2 at once
  EXPECT_TRUE(s.staged[0]);
  EXPECT_FALSE(s.staged[1]);
  EXPECT_TRUE(s.aligned[0] && s.aligned[1]);
  EXPECT_NE(s.name().find("f32at_f32a_"), std::string::npos) << s.name();
  EXPECT_EQ(s.sources()[0].name_expression,
            "tileops::ew::tiled_fwd<tileops::ew::Op<tileops::ew::expr::elementwise_add_fwd__0, float, float, 1, "
            "tileops::ew::In<float, false, true, true, false>, tileops::ew::In<float, false, true, false, false>>, int, 2>");
  // both inputs transposed: both staged, each in its own tile
  s = add_plan(at::empty({512, 384}, f).t(), at::empty({512, 384}, f).t());
  EXPECT_TRUE(s.staged[0] && s.staged[1]);
  EXPECT_NE(s.sources()[0].name_expression.find("In<float, false, true, true, false>, tileops::ew::In<float, false, true, "
                                                "true, false>"), std::string::npos);
  // odd sizes: one element a thread (a pair would cross the edge)
  s = add_plan(at::empty({515, 389}, f).t(), at::empty({389, 515}, f));
  EXPECT_TRUE(s.staged[0]);
  EXPECT_EQ(s.vec, 1);
  EXPECT_EQ(s.sources()[0].name_expression.rfind("tileops::ew::tiled_fwd<", 0), 0u);
  EXPECT_NE(s.sources()[0].name_expression.find(">>, int, 1>"), std::string::npos) << s.sources()[0].name_expression;
  // a staged input starting one element in, and another whose rows start one element in: 2 a thread,
  // each read one element at a time
  s = add_plan(at::empty({512 * 384 + 1}, f).slice(0, 1).view({512, 384}).t(),
               at::empty({384, 514}, f).slice(1, 1, 513));
  EXPECT_EQ(s.vec, 2);
  EXPECT_TRUE(s.staged[0]);
  EXPECT_FALSE(s.aligned[0] || s.aligned[1]);
  // a column broadcast over the rows beside a transposed input: read one element a step
  s = add_plan(at::empty({512, 384}, f).t(), at::empty({384, 1}, f));
  EXPECT_EQ(s.vec, 2);
  EXPECT_FALSE(s.aligned[1]);
  // fewer than a tile of columns: one element a step
  s = add_plan(at::empty({16, 384}, f).t(), at::empty({384, 16}, f));
  EXPECT_FALSE(s.staged[0]);
  EXPECT_EQ(s.sources()[0].name_expression.rfind("tileops::ew::strided_fwd<", 0), 0u) << s.sources()[0].name_expression;
}

TEST(ElementwiseLaunch, SmallCallsSpreadOverMoreSms) {
  using tileops::nvrtc::ew_contiguous_threads;
  // enough steps for a CTA of 128 threads x 2 on each of 132 SMs: full CTAs
  EXPECT_EQ(ew_contiguous_threads(int64_t{132} * 256, 132), 128);
  EXPECT_EQ(ew_contiguous_threads(int64_t{1} << 24, 132), 128);
  // 2048 x 4096 bf16 (1 M steps of 8): full CTAs
  EXPECT_EQ(ew_contiguous_threads(int64_t{2048} * 4096 / 8, 132), 128);
  // decode-sized calls: 4 x 8192 bf16 (4096 steps) would be 16 CTAs of 128; 64 CTAs of 32 threads
  EXPECT_EQ(ew_contiguous_threads(4096, 132), 32);
  // between: a power of two that keeps about one CTA an SM
  EXPECT_EQ(ew_contiguous_threads(int64_t{132} * 2 * 50, 132), 64);
  EXPECT_EQ(ew_contiguous_threads(1, 132), 32);
}

TEST(ElementwisePlan, OddRowsStepOneElement) {
  const auto f = at::TensorOptions().dtype(c10::kFloat);
  EwSpec s = add_plan(at::empty({64, 5}, f), at::empty({5}, f));  // rows of 5: no group of 2 or 4 fits
  EXPECT_EQ(s.vec, 1);
  s = add_plan(at::empty({64, 6}, f), at::empty({6}, f));  // rows of 6: groups of 2
  EXPECT_EQ(s.vec, 2);
}

TEST(ElementwiseCompute, PromotionRule) {
  const auto& add = ew::kOps[0];
  const c10::ScalarType i32 = c10::kInt, f16 = c10::kHalf, b = c10::kBool;
  EXPECT_EQ(tileops::nvrtc::ew_compute_dtype(add, {&f16, 1}, c10::kHalf), c10::kFloat);   // opmath
  EXPECT_EQ(tileops::nvrtc::ew_compute_dtype(add, {&i32, 1}, c10::kFloat), c10::kFloat);  // sqrt(int)
  EXPECT_EQ(tileops::nvrtc::ew_compute_dtype(add, {&i32, 1}, c10::kBool), c10::kInt);     // int comparison
  EXPECT_EQ(tileops::nvrtc::ew_compute_dtype(add, {&b, 1}, c10::kBool), c10::kBool);
}

// Every entry compiles on its four paths: float16 through float (int32 for the bitwise entries), a
// broadcast single element on the contiguous path, rank 3 with 64-bit indexing on the strided one,
// the strided path 8 elements a step, and the tiled loop with the first input staged (1 or 2 a thread).
class ElementwiseCompiles : public ::testing::TestWithParam<int> {};

EwSpec spec_for(int op, c10::ScalarType dt, int rank, bool index64) {
  const auto& e = ew::kOps[op];
  EwSpec s;
  s.op = op;
  for (int k = 0; k < e.n_in; ++k) s.in[k] = e.in_fixed[k] ? c10::kBool : dt;
  s.out = dt;
  s.compute = dt == c10::kHalf ? c10::kFloat : dt;
  s.rank = rank;
  s.vec = rank == 0 ? 8 : 1;
  s.one[e.n_in - 1] = rank == 0 && e.n_in > 1;  // a broadcast single element on the contiguous path
  s.index64 = index64;
  s.arch = "sm_90a";
  return s;
}

TEST_P(ElementwiseCompiles, EveryPathToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const int op = GetParam();
  // bitwise entries take integers only; every other entry takes float16
  const c10::ScalarType dt = std::string(ew::kOps[op].cls).rfind("Bitwise", 0) == 0 ? c10::kInt : c10::kHalf;
  for (const auto& [rank, index64] : {std::pair{0, false}, std::pair{3, true}, std::pair{2, false}, std::pair{-2, false}}) {
    EwSpec s = spec_for(op, dt, rank < 0 ? 2 : rank, index64);
    if (rank < 0) {  // the tiled loop: 2 a thread, aligned, for every other entry
      s.staged[0] = true;
      if (op % 2 == 0) {
        s.vec = 2;
        for (int k = 0; k < ew::kOps[op].n_in; ++k) s.aligned[k] = true;
      }
    } else if (rank == 2) {  // the strided path 8 elements a step: a vector load, and element loads or one held
      s.vec = 8;
      s.aligned[0] = true;
      for (int k = 1; k < ew::kOps[op].n_in; ++k) (k % 2 ? s.one : s.aligned)[k] = k % 2 == 1;
    }
    const auto srcs = s.sources();
    ASSERT_EQ(srcs.size(), 1u);
    const auto cubin = tileops::jit::compile_to_cubin(srcs[0]);
    EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << srcs[0].name;
    EXPECT_NE(srcs[0].name.find(ew::kOps[op].stem), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryEntry, ElementwiseCompiles, ::testing::Range(0, ew::kNumOps),
                         [](const ::testing::TestParamInfo<int>& i) { return std::string(ew::kOps[i.param].cls); });

// The integer forms of the entries whose device functions differ for integers, and every case of an
// entry whose expression a str param or the optional inputs given choose (Div's rounding modes,
// Clamp's bounds), each to CUBIN.
TEST(ElementwiseCompiles, IntegerFormsAndEveryChoiceToCubin) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  for (const char* cls : {"ClampScalarFwdOp", "ClampMinFwdOp", "ClampMaxFwdOp", "NanToNumFwdOp", "DivFwdOp", "ClampFwdOp"}) {
    const int op = entry(cls);
    ASSERT_GE(op, 0) << cls;
    for (const c10::ScalarType dt : {c10::kHalf, c10::kByte, c10::kInt, c10::kLong}) {
      for (int c = 0; c < ew::kOps[op].n_cases; ++c) {
        EwSpec s = spec_for(op, dt, 0, false);
        s.variant = c;
        if (c == 0 && std::string(cls) == "DivFwdOp" && dt != c10::kHalf) continue;  // true division: float out
        const auto srcs = s.sources();
        EXPECT_TRUE(instantiates(s, op, c)) << srcs[0].name_expression;
        EXPECT_NE(functor_of(op, c).find(ew::kOps[op].case_exprs[c]), std::string::npos) << cls << " " << c;
        const auto cubin = tileops::jit::compile_to_cubin(srcs[0]);
        EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << srcs[0].name;
      }
    }
  }
}

// A str param picks the expression when the kernel is planned: each value its own kernel identity.
TEST(ElementwisePlan, RoundingModeIsPartOfTheIdentity) {
  const int div = entry("DivFwdOp");
  const auto i32 = at::TensorOptions().dtype(c10::kInt);
  const std::vector<at::Tensor> in{at::ones({8, 16}, i32), at::ones({16}, i32)};
  const std::vector<at::Tensor> out{at::empty({8, 16}, i32)};
  std::vector<std::string> names;
  for (const char* mode : {"trunc", "floor"}) {
    const std::vector<tileops::ParamValue> params{tileops::ParamValue::string(mode)};
    const tileops::OpCall call{0, "tileops::elementwise_div_fwd", c10::Device(c10::kCPU), in, out, params};
    const EwSpec s = tileops::nvrtc::ew_problem(div, call);
    EXPECT_STREQ(ew::kOps[div].case_values[s.variant], mode);
    names.push_back(s.name());
    EXPECT_TRUE(instantiates(s, div, s.variant)) << s.sources()[0].name_expression;
  }
  EXPECT_NE(names[0], names[1]);
  EXPECT_NE(names[1].find("__mfloor"), std::string::npos) << names[1];
}

// An integer Scalar the compute type cannot hold is refused as torch refuses it (not wrapped), named
// by op and param; uint8 takes -255..255 and wraps, as in torch.
TEST(ElementwisePlan, IntegerScalarsThatOverflowAreRefused) {
  const int clamp = entry("ClampScalarFwdOp");
  auto plan = [&](c10::ScalarType dt, int64_t lo) {
    const std::vector<at::Tensor> in{at::ones({8, 16}, at::TensorOptions().dtype(dt))};
    const std::vector<at::Tensor> out{at::empty({8, 16}, at::TensorOptions().dtype(dt))};
    const std::vector<tileops::ParamValue> params{tileops::ParamValue::integer(lo), tileops::ParamValue()};
    const tileops::OpCall call{0, "tileops::elementwise_clamp_scalar_fwd", c10::Device(c10::kCPU), in, out, params};
    return tileops::nvrtc::ew_problem(clamp, call);
  };
  try {
    plan(c10::kChar, -300);
    FAIL() << "min=-300 for int8 was accepted";
  } catch (const c10::Error& err) {
    const std::string msg = err.what_without_backtrace();
    EXPECT_NE(msg.find("tileops::elementwise_clamp_scalar_fwd: 'min' = -300"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot be converted to type int8_t without overflow"), std::string::npos) << msg;
  }
  EXPECT_THROW(plan(c10::kInt, int64_t{1} << 31), c10::Error);
  EXPECT_THROW(plan(c10::kByte, -256), c10::Error);
  EXPECT_NO_THROW(plan(c10::kByte, -1));
  EXPECT_NO_THROW(plan(c10::kChar, -128));
  EXPECT_NO_THROW(plan(c10::kLong, std::numeric_limits<int64_t>::min()));
}

// None stands for a value the engine puts in: a bound that never binds; the kernel is the same.
TEST(ElementwisePlan, NoneBoundsNeedNoOtherKernel) {
  const int clamp = entry("ClampScalarFwdOp");
  const auto f = at::TensorOptions().dtype(c10::kFloat);
  const std::vector<at::Tensor> in{at::ones({8, 16}, f)};
  const std::vector<at::Tensor> out{at::empty({8, 16}, f)};
  const std::vector<tileops::ParamValue> both{tileops::ParamValue::real(0.0), tileops::ParamValue::real(1.0)};
  const std::vector<tileops::ParamValue> one{tileops::ParamValue(), tileops::ParamValue::real(1.0)};
  const tileops::OpCall a{0, "tileops::elementwise_clamp_scalar_fwd", c10::Device(c10::kCPU), in, out, both};
  const tileops::OpCall b{0, "tileops::elementwise_clamp_scalar_fwd", c10::Device(c10::kCPU), in, out, one};
  EXPECT_TRUE(tileops::nvrtc::ew_problem(clamp, a) == tileops::nvrtc::ew_problem(clamp, b));
}

// ClampFwdOp's optional bounds: the inputs given pick the expression (a kernel identity each, named by
// the inputs given), an absent bound stands in as the input for layout and dtype.
TEST(ElementwisePlan, OptionalBoundsPickTheirCaseAndWaitForTheirKernels) {
  const int clamp = entry("ClampFwdOp");
  const auto f = at::TensorOptions().dtype(c10::kFloat);
  const at::Tensor x = at::ones({8, 16}, f), bound = at::ones({16}, at::TensorOptions().dtype(c10::kHalf));
  const std::vector<at::Tensor> out{at::empty({8, 16}, f)};
  const std::vector<tileops::ParamValue> none{tileops::ParamValue()};
  const auto problem = [&](std::vector<at::Tensor> in) {
    const tileops::OpCall call{0, "tileops::elementwise_clamp_fwd", c10::Device(c10::kCPU), in, out,
                               c10::ArrayRef<tileops::ParamValue>(none.data(), size_t{0})};
    return tileops::nvrtc::ew_problem(clamp, call);
  };
  const EwSpec both = problem({x, bound, bound}), min_only = problem({x, bound, at::Tensor()}),
               max_only = problem({x, at::Tensor(), bound});
  EXPECT_STREQ(ew::kOps[clamp].case_exprs[both.variant], "minimum(maximum(input, min), max)");
  EXPECT_STREQ(ew::kOps[clamp].case_exprs[min_only.variant], "maximum(input, min)");
  EXPECT_STREQ(ew::kOps[clamp].case_exprs[max_only.variant], "minimum(input, max)");
  EXPECT_EQ(both.name().find("__g"), std::string::npos) << both.name();  // the case with both keeps its name
  EXPECT_NE(min_only.name().find("__g3"), std::string::npos) << min_only.name();
  EXPECT_NE(max_only.name().find("__g5"), std::string::npos) << max_only.name();
  EXPECT_EQ(max_only.in[1], c10::kFloat);  // the absent min stands in as the input
  EXPECT_TRUE(instantiates(max_only, clamp, max_only.variant)) << max_only.sources()[0].name_expression;
  try {
    problem({x, at::Tensor(), at::Tensor()});
    FAIL() << "a clamp with neither bound reached a kernel";
  } catch (const c10::Error& err) {
    EXPECT_NE(std::string(err.what_without_backtrace()).find("tileops::elementwise_clamp_fwd: no expression"),
              std::string::npos);
  }
}

// A float param of an op computing in an integer type (nan_to_num's for int32 input) is saturated
// into it, not refused as a float Scalar is.
TEST(ElementwisePlan, FloatParamsOfIntegerInputsAreSaturated) {
  const int nan_to_num = entry("NanToNumFwdOp");
  const auto i32 = at::TensorOptions().dtype(c10::kInt);
  const std::vector<at::Tensor> in{at::ones({8, 16}, i32)};
  const std::vector<at::Tensor> out{at::empty({8, 16}, i32)};
  const std::vector<tileops::ParamValue> params{tileops::ParamValue::real(1.5), tileops::ParamValue::real(1e39),
                                                tileops::ParamValue()};
  const tileops::OpCall call{0, "tileops::elementwise_nan_to_num_fwd", c10::Device(c10::kCPU), in, out, params};
  EXPECT_EQ(tileops::nvrtc::ew_problem(nan_to_num, call).compute, c10::kInt);
  const int add = entry("AddFwdOp");  // a float Scalar for integer inputs stays refused
  const std::vector<at::Tensor> two{at::ones({8, 16}, i32), at::ones({8, 16}, i32)};
  const std::vector<tileops::ParamValue> alpha{tileops::ParamValue::real(0.5)};
  const tileops::OpCall add_call{0, "tileops::elementwise_add_fwd", c10::Device(c10::kCPU), two, out, alpha};
  EXPECT_THROW(tileops::nvrtc::ew_problem(add, add_call), c10::Error);
}

// along(input, 1): the weight reaches the engine as [C, 1, ...] (one element: 0-dim), so the layout
// gives it stride 1 along the channels and 0 elsewhere, whatever its own stride.
TEST(ElementwiseLayout, WeightAlongDimOneBroadcastsOverTheOtherDims) {
  const at::Tensor w = at::ones({12}).slice(0, 0, 12, 2);  // 6 channels, stride 2
  const at::Tensor v = tileops::check::along_view(w, 4, 1);
  EXPECT_EQ(v.sizes(), (c10::IntArrayRef{6, 1, 1}));
  EXPECT_EQ(v.data_ptr(), w.data_ptr());
  EXPECT_EQ(tileops::check::along_view(at::ones({1}), 4, 1).dim(), 0);
  const auto l = layout({{2, 6, 4, 5}, {6, 1, 1}}, {{120, 20, 5, 1}, {2, 1, 1}}, {2, 6, 4, 5});
  EXPECT_EQ(std::vector<int64_t>(l.sizes.begin(), l.sizes.end()), (std::vector<int64_t>{2, 6, 20}));
  EXPECT_EQ(std::vector<int64_t>(l.strides[1].begin(), l.strides[1].end()), (std::vector<int64_t>{0, 2, 0}));
}

TEST(ElementwiseSpec, IdentityIsExpressionDtypesAndPathNotSizes) {
  const EwSpec a = spec_for(0, c10::kHalf, 0, false), b = spec_for(0, c10::kHalf, 2, false);
  EXPECT_FALSE(a == b);
  EXPECT_NE(a.name(), b.name());
  EXPECT_NE(a.name().find("__v8"), std::string::npos);
  EXPECT_NE(b.name().find("__r2"), std::string::npos);
  EXPECT_TRUE(instantiates(a, 0, 0));
  EXPECT_NE(functor_of(0, 0).find(ew::kOps[0].expr), std::string::npos);
}

// The contiguous loop's unroll (a tuning knob) is part of the kernel's identity and code; a CTA never
// takes more threads than the spec allows, and the spec's threads and steps size it.
TEST(ElementwiseSpec, UnrollIsInTheNameAndTheLoop) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  EwSpec s = spec_for(entry("AbsFwdOp"), c10::kHalf, 0, false);
  const EwSpec base = s;
  s.unroll = 4;
  EXPECT_FALSE(s == base);
  EXPECT_NE(s.name().find("__v8u4"), std::string::npos) << s.name();
  EXPECT_EQ(base.name().find("__v8u"), std::string::npos) << base.name();  // the default keeps its name
  EXPECT_NE(base.sources()[0].name_expression.find(">>, 8, 2, int>"), std::string::npos);
  const auto srcs = s.sources();
  EXPECT_NE(srcs[0].name_expression.find(">>, 8, 4, int>"), std::string::npos) << srcs[0].name_expression;
  EXPECT_EQ(tileops::jit::compile_to_cubin(srcs[0]).image.substr(0, 4), std::string("\x7f" "ELF"));
  // TILEOPS_TUNE=ew_unroll=.. reaches the spec, a power of two only: at 6 (a chunk of 768 steps) the
  // last int CTA step of 2^30 - 1 one-element steps would pass 2^31 and wrap
  const auto h200 = tileops::nvrtc::named_device_facts("h200");
  EXPECT_EQ(tileops::nvrtc::plan_elementwise(base, h200).unroll, base.unroll);
  EXPECT_THROW(tileops::nvrtc::parse_tuning("ew_unroll=6"), c10::Error);
  const tileops::nvrtc::Tuning tune = tileops::nvrtc::parse_tuning("ew_unroll=8");
  EXPECT_EQ(tileops::nvrtc::plan_elementwise(base, h200, tune).unroll, 8);
  EXPECT_EQ(tileops::nvrtc::plan_elementwise(base, h200, tune).arch, h200.arch);
  // other threads and steps (TILEOPS_TUNE=ew_threads=256,ew_unroll=4): the CTA sizing follows them
  EXPECT_EQ(tileops::nvrtc::ew_contiguous_threads(int64_t{132} * 1024, 132, 256, 4), 256);
  EXPECT_EQ(tileops::nvrtc::ew_contiguous_threads(int64_t{132} * 4 * 100, 132, 256, 4), 128);
  EXPECT_EQ(tileops::nvrtc::ew_contiguous_threads(int64_t{132} * 4 * 100, 132), 128);  // 128 x 2: full
  // the most threads a CTA is launch-only but part of the identity, and named when not the default
  EwSpec t = base;
  t.cta_threads = 64;
  EXPECT_FALSE(t == base);
  EXPECT_NE(t.name().find("__v8t64"), std::string::npos) << t.name();
}

// A 16-bit output opens the for16 forms of expm1 and softplus in value() (elementwise.cuh): the
// entries' functors take them under R16, which op.cuh sets from the output type; every dtype compiles.
TEST(ElementwiseSpec, SixteenBitOutputsTakeTheFor16Forms) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  for (const char* cls : {"SeluFwdOp", "SoftplusFwdOp", "Expm1FwdOp"}) {
    const int op = entry(cls);
    ASSERT_GE(op, 0) << cls;
    for (const c10::ScalarType dt : {c10::kHalf, c10::kBFloat16, c10::kFloat}) {
      EwSpec s = spec_for(op, dt, 0, false);
      s.compute = c10::kFloat;
      const auto srcs = s.sources();
      EXPECT_NE(functor_of(op, 0).find("if constexpr (R16) { TILEOPS_EW_16BIT_RESULTS"), std::string::npos) << cls;
      const auto cubin = tileops::jit::compile_to_cubin(srcs[0]);
      EXPECT_EQ(cubin.image.substr(0, 4), std::string("\x7f" "ELF")) << srcs[0].name;
    }
  }
}

// Operands that are all float16 or bfloat16 open the for16 floor_divide and remainder (elementwise.cuh)
// under O16, which op.cuh sets only when every input is 16-bit; every mix compiles.
TEST(ElementwiseSpec, SixteenBitOperandsTakeTheFor16Modulo) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const std::pair<c10::ScalarType, c10::ScalarType> cases[] = {{c10::kHalf, c10::kHalf}, {c10::kBFloat16, c10::kHalf},
                                                               {c10::kBFloat16, c10::kFloat}, {c10::kFloat, c10::kFloat}};
  for (const char* name : {"FloorDivideFwdOp", "RemainderFwdOp"}) {
    const int op = entry(name);
    ASSERT_GE(op, 0) << name;
    for (const auto& [a, b] : cases) {
      EwSpec s = spec_for(op, a, 0, false);
      s.in[1] = b;
      s.out = c10::promoteTypes(a, b);
      s.compute = c10::kFloat;
      const auto srcs = s.sources();
      EXPECT_NE(functor_of(op, 0).find("if constexpr (O16) { TILEOPS_EW_16BIT_OPERANDS"), std::string::npos) << name;
      EXPECT_EQ(tileops::jit::compile_to_cubin(srcs[0]).image.substr(0, 4), std::string("\x7f" "ELF")) << srcs[0].name;
    }
  }
}

}  // namespace

// Kernel specs, plans and tuning of the nvrtc target, without a GPU: eps is a launch argument (two
// eps values, one spec and one source), the sources an offline warm-up gets for a named device are
// the ones the build path compiles (same disk keys), TILEOPS_TUNE is validated and reaches the plans.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <array>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <c10/util/SmallVector.h>

#include "jit/cuda_driver.h"
#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/elementwise/elementwise.h"
#include "targets/nvrtc/norm/group_norm.h"
#include "targets/nvrtc/norm/norm_bwd_launch.h"
#include "targets/nvrtc/norm/row_norm_launch.h"
#include "targets/nvrtc/pool/pool.h"
#include "targets/nvrtc/reduction/reduce.h"
#include "targets/nvrtc/reduction/softmax_launch.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace {

using namespace tileops::nvrtc;
using tileops::OpCall;
using tileops::ParamValue;

// One call's tensors and params (CPU tensors: the problem reads shapes, dtypes and alignment only).
struct Call {
  std::vector<at::Tensor> in, out;
  std::vector<ParamValue> params;
  OpCall call(const char* op) const {
    return OpCall{0, op, c10::Device(c10::kCPU), in, out, params};
  }
};

at::Tensor t(std::vector<int64_t> shape, c10::ScalarType dtype = c10::kBFloat16) {
  return at::empty(shape, at::TensorOptions().dtype(dtype));
}

// The build path of spec_builder without a GPU: identity plans the call's problem into the table,
// build reads the spec back and compiles its sources.
template <class Family>
std::vector<tileops::jit::KernelSource> build_path_sources(const Family& f, const OpCall& call, const DeviceFacts& dev) {
  SpecTable<Family> table;
  return table.spec(table.id_for(f, f.problem(call), dev, 0)).sources();
}

std::vector<std::string> disk_keys(const std::vector<tileops::jit::KernelSource>& sources) {
  std::vector<std::string> keys;
  for (const auto& s : sources) keys.push_back(tileops::jit::disk_key(s));
  return keys;
}

const std::vector<int64_t> kShape4096{4096};
const std::vector<int64_t> kShape8192{8192};

Call rms_norm_call(double eps) {
  namespace op = tileops::ops::norm_rms_norm_fwd;
  static_assert(op::x == 0 && op::weight == 1 && op::normalized_shape == 0 && op::eps == 1);
  return Call{{t({64, 4096}), t({4096})}, {t({64, 4096})},
              {ParamValue::ints(kShape4096), ParamValue::real(eps)}};
}

Call layer_norm_call(double eps) {
  namespace op = tileops::ops::norm_layer_norm_fwd;
  static_assert(op::x == 0 && op::weight == 1 && op::bias == 2);
  return Call{{t({64, 8192}), t({8192}), t({8192})}, {t({64, 8192})},
              {ParamValue::ints(kShape8192), ParamValue::real(eps)}};
}

Call rms_norm_bwd_call(double eps) {
  namespace op = tileops::ops::norm_rms_norm_bwd;
  static_assert(op::dy == 0 && op::x == 1 && op::weight == 2 && op::dx == 0 && op::dweight == 1);
  return Call{{t({64, 4096}), t({64, 4096}), t({4096})}, {t({64, 4096}), t({4096})},
              {ParamValue::ints(kShape4096), ParamValue::real(eps)}};
}

TEST(EpsIsALaunchArgument, TwoEpsValuesShareOneSpecAndOneSource) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const DeviceFacts h200 = named_device_facts("h200");
  {
    const auto f = rms_norm_fwd_family();
    const Call a = rms_norm_call(1e-5), b = rms_norm_call(1e-6);
    EXPECT_EQ(f.problem(a.call("tileops::norm_rms_norm_fwd")), f.problem(b.call("tileops::norm_rms_norm_fwd")));
    SpecTable<RowNormFamily> table;
    EXPECT_EQ(table.id_for(f, f.problem(a.call("a")), h200, 0), table.id_for(f, f.problem(b.call("b")), h200, 0));
    EXPECT_EQ(disk_keys(build_path_sources(f, a.call("a"), h200)), disk_keys(build_path_sources(f, b.call("b"), h200)));
  }
  {
    const auto f = layer_norm_fwd_family();
    EXPECT_EQ(f.problem(layer_norm_call(1e-5).call("a")), f.problem(layer_norm_call(1e-3).call("b")));
  }
  {
    const auto f = rms_norm_bwd_family();
    EXPECT_EQ(f.problem(rms_norm_bwd_call(1e-5).call("a")), f.problem(rms_norm_bwd_call(1e-6).call("b")));
  }
}

// What an offline warm-up compiles for a named device (no GPU) is what a call's build loads there.
TEST(OfflineSources, EqualWhatTheBuildPathCompiles) {
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  for (const char* device : {"h200", "a100"}) {
    const DeviceFacts dev = named_device_facts(device);
    {
      const auto f = rms_norm_fwd_family();
      RowNormProblem q{RowNormOp::kRmsNorm, c10::kBFloat16, 4096, 8, true};
      q.few_rows = true;  // the call's 64 rows
      EXPECT_EQ(disk_keys(kernel_sources(f, q, dev)), disk_keys(build_path_sources(f, rms_norm_call(1e-6).call("r"), dev)));
    }
    {
      const auto f = layer_norm_fwd_family();
      const RowNormProblem q{RowNormOp::kLayerNorm, c10::kBFloat16, 8192, 8, true, true};
      const auto sources = kernel_sources(f, q, dev);
      EXPECT_EQ(disk_keys(sources), disk_keys(build_path_sources(f, layer_norm_call(1e-5).call("l"), dev)));
      EXPECT_EQ(sources[0].name.find("staged") != std::string::npos, dev.cc_major >= 9) << sources[0].name;
    }
    {
      const auto f = rms_norm_bwd_family();
      const NormBwdProblem q{false, c10::kBFloat16, 4096, 8, true, true, false};
      const auto sources = kernel_sources(f, q, dev);
      ASSERT_EQ(sources.size(), 2u);  // the main kernel and the reduction of dweight
      EXPECT_EQ(disk_keys(sources), disk_keys(build_path_sources(f, rms_norm_bwd_call(1e-6).call("b"), dev)));
    }
    {
      const SoftmaxFamily f{false};
      const Call c{{t({4, 128256})}, {t({4, 128256})}, {ParamValue::integer(-1)}};
      const SoftmaxProblem q{false, c10::kBFloat16, 128256, 8, true};
      EXPECT_EQ(disk_keys(kernel_sources(f, q, dev)), disk_keys(build_path_sources(f, c.call("s"), dev)));
    }
    for (const auto& s : kernel_sources(rms_norm_fwd_family(), RowNormProblem{RowNormOp::kRmsNorm, c10::kBFloat16, 4096, 8, true}, dev))
      EXPECT_EQ(s.arch, dev.arch);
  }
}

TEST(DeviceFacts, NamedDevicesNeedNoGpu) {
  const DeviceFacts h200 = named_device_facts("h200");
  EXPECT_EQ(h200.arch, "sm_90a");
  EXPECT_EQ(h200.sm_count, 132);
  EXPECT_EQ(h200.max_smem_optin, 227 * 1024);
  EXPECT_EQ(named_device_facts("sm_90a").arch, "sm_90a");
  const DeviceFacts a100 = named_device_facts("a100");
  EXPECT_EQ(a100.arch, "sm_80");
  EXPECT_EQ(a100.sm_count, 108);
  EXPECT_EQ(named_device_facts("l40s").arch, "sm_89");
  EXPECT_THROW(named_device_facts("v100"), std::invalid_argument);
}

TEST(Tuning, ParsesKnownKeysAndRejectsTheRest) {
  EXPECT_EQ(parse_tuning(""), Tuning{});
  const Tuning t = parse_tuning("rms_vecs_per_thread=8,cluster_max=16");
  EXPECT_EQ(t.rms_vecs_per_thread, 8);
  EXPECT_EQ(t.cluster_max, 16);
  EXPECT_EQ(t.softmax_vecs_per_thread, 0);
  for (const char* bad : {"no_such_key=1", "rms_vecs_per_thread", "rms_vecs_per_thread=0", "rms_vecs_per_thread=x",
                          "cluster_max=17", "rms_vecs_per_thread=4x", "ew_unroll=3",
                          "gn_cta_threads=96"}) {
    try {
      parse_tuning(bad);
      FAIL() << bad << " was accepted";
    } catch (const c10::Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("TILEOPS_TUNE"), std::string::npos) << what;
    }
  }
  try {
    parse_tuning("staged_walk=1");
    FAIL();
  } catch (const c10::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown key 'staged_walk'"), std::string::npos) << what;
    EXPECT_NE(what.find("norm_bwd_blocks_per_sm"), std::string::npos) << what;  // the keys are listed
  }
}

TEST(Tuning, EveryKeyIsListedAndReachesItsField) {
  const std::string list = describe_tuning_keys();
  for (const auto& k : tuning_keys()) {
    EXPECT_NE(list.find(k.name), std::string::npos) << k.name;
    const Tuning t = parse_tuning(std::string(k.name) + "=" + std::to_string(k.hi));
    EXPECT_EQ(t.*(k.field), k.hi) << k.name;
    EXPECT_NE(t, Tuning{}) << k.name;
  }
}

TEST(Tuning, OverridesReachThePlans) {
  const DeviceFacts h200 = named_device_facts("h200");
  const RowNormProblem q{RowNormOp::kRmsNorm, c10::kBFloat16, 4096, 8, true};
  EXPECT_EQ(plan_row_norm(q, h200).tpr, 128);  // 512 vectors, 4 a thread
  EXPECT_EQ(plan_row_norm(q, h200, parse_tuning("rms_vecs_per_thread=8")).tpr, 64);
  const RowNormProblem staged{RowNormOp::kRmsNorm, c10::kBFloat16, 8192, 8, true};
  EXPECT_EQ(plan_row_norm(staged, h200).impl, RowNormImpl::kStaged);
  EXPECT_EQ(plan_row_norm(staged, h200, parse_tuning("staged_min_row_bytes=1073741824")).impl,
            RowNormImpl::kRegisterResident);
}

// A spec is a value: equal problems on equal devices plan equal specs; the spec is the cache identity.
TEST(SpecTable, EqualSpecsShareAnIdDevicesPlanSeparately) {
  const auto f = rms_norm_fwd_family();
  SpecTable<RowNormFamily> table;
  const RowNormProblem a{RowNormOp::kRmsNorm, c10::kBFloat16, 4096, 8, true};
  RowNormProblem b = a;
  b.max_vec = 16;  // wider pointers, same access width: the same kernel
  const DeviceFacts h200 = named_device_facts("h200"), a100 = named_device_facts("a100");
  const uint32_t id = table.id_for(f, a, h200, 0);
  EXPECT_EQ(table.id_for(f, b, h200, 0), id);
  EXPECT_EQ(table.id_for(f, a, h200, 1), id);  // a second H200
  const uint32_t other = table.id_for(f, a, a100, 2);
  EXPECT_NE(other, id);
  EXPECT_EQ(table.spec(other).arch, "sm_80");
  EXPECT_EQ(table.spec(id).describe(), "rms_norm_fwd(dtype=bf16, n=4096, weight=yes, vec=8, impl=register-resident)");
}

// A spec's identity is its TILEOPS_IDENTITY list: a copy is equal with an equal hash, and a copy
// differing in any one field is unequal and hashes apart (changes: one a field, in list order).
template <class S>
void expect_identity(const S& base, std::initializer_list<std::function<void(S&)>> changes) {
  const S same = base;
  EXPECT_TRUE(same == base);
  EXPECT_EQ(same.hash(), base.hash());
  EXPECT_EQ(changes.size(), std::tuple_size_v<decltype(base.identity())>);  // every field is covered
  int field = 0;
  for (const auto& change : changes) {
    S other = base;
    change(other);
    EXPECT_FALSE(other == base) << "field " << field;
    EXPECT_TRUE(other != base) << "field " << field;
    EXPECT_NE(other.hash(), base.hash()) << "field " << field;
    ++field;
  }
}

// Each family's plans read one table: its constexpr defaults with TILEOPS_TUNE's keys laid over them.
TEST(TuningTables, EachKeyOverridesItsFamilysTableAndNothingElse) {
  EXPECT_EQ(row_norm_table(Tuning{}).vecs_per_thread, kRowNormTable.vecs_per_thread);
  const RowNormTable r = row_norm_table(parse_tuning(
      "rms_vecs_per_thread=8,rms_few_rows_vpt=4,cluster_cta_bytes=16384,cluster_max=16,cluster_vpt=8,"
      "staged_cluster_vpt=8,staged_min_row_bytes=4096,staged_row_vpt=16"));
  EXPECT_EQ(std::make_tuple(r.vecs_per_thread, r.few_rows_vecs_per_thread, r.cluster_cta_bytes, r.cluster_max,
                            r.cluster_vpt, r.cluster_staged_vpt),
            std::make_tuple(8, 4, 16384, 16, 8, 8));
  for (int v : {r.rms_staged_min_row_bytes, r.fused_staged_min_row_bytes, r.ln_staged_min_row_bytes}) EXPECT_EQ(v, 4096);
  for (int v : {r.rms_staged_vpt, r.fused_staged_vpt, r.ln_staged_vpt_short, r.ln_staged_vpt_long}) EXPECT_EQ(v, 16);
  EXPECT_EQ(r.register_max_row_bytes, kRowNormTable.register_max_row_bytes);  // no key

  const SoftmaxTable sm = softmax_table(parse_tuning("softmax_vecs_per_thread=8,staged_row_vpt=2,cluster_max=4"));
  EXPECT_EQ(std::make_tuple(sm.vecs_per_thread, sm.staged_vpt, sm.staged_long_vpt, sm.cluster_max),
            std::make_tuple(8, 2, 2, 4));
  EXPECT_EQ(sm.split_chunk, kSoftmaxTable.split_chunk);

  const NormBwdTable nb = norm_bwd_table(parse_tuning(
      "norm_bwd_vecs_per_thread=8,norm_bwd_cta_threads=128,norm_bwd_blocks_per_sm=1,norm_bwd_plain_reduce=1"));
  EXPECT_EQ(std::make_tuple(nb.vecs_per_thread, nb.cta_threads, nb.blocks_per_sm, nb.plain_reduce),
            std::make_tuple(8, 128, 1, true));

  const GroupNormTable gn = group_norm_table(parse_tuning("gn_vecs_per_thread=2,gn_running_vecs_per_thread=2,gn_cta_threads=32"));
  EXPECT_EQ(std::make_tuple(gn.vecs_per_thread, gn.running_vecs_per_thread, gn.rows_cta_threads, gn.cta_threads),
            std::make_tuple(2, 2, 32, kGroupNormTable.cta_threads));  // a split chunk's CTA keeps its size

  const ReduceTable rd = reduce_table(parse_tuning("reduce_cols_warps=4,reduce_ctas_per_sm=2,reduce_split_vecs=8,"
                                                   "reduce_cols_split_rows=32,reduce_cols_vec=8"));
  EXPECT_EQ(std::make_tuple(rd.cols_warps, rd.fill_ctas_per_sm, rd.min_split_vecs, rd.cols_split_rows, rd.cols_max_vec),
            std::make_tuple(4, 2, 8, 32, 8));
}

TEST(SpecIdentity, HashIdentityFoldsStringsArraysAndVectors) {
  const std::string sm90 = "sm_90", sm80 = "sm_80", sm90b = "sm_90";
  EXPECT_EQ(hash_identity(std::tie(sm90)), hash_identity(std::tie(sm90b)));
  EXPECT_NE(hash_identity(std::tie(sm90)), hash_identity(std::tie(sm80)));
  std::array<int, 12> w{3, 3, 1, 1, 2, 2, 0, 0, 1, 1, 1, 1}, w2 = w;
  EXPECT_EQ(hash_identity(std::tie(w)), hash_identity(std::tie(w2)));
  for (size_t k = 0; k < w.size(); ++k) {
    w2 = w;
    ++w2[k];
    EXPECT_NE(hash_identity(std::tie(w)), hash_identity(std::tie(w2))) << "element " << k;
  }
  std::array<bool, 4> b{}, b1{};
  b1[3] = true;
  EXPECT_NE(hash_identity(std::tie(b)), hash_identity(std::tie(b1)));
  // Lengths count: an empty vector is not one zero; a vector and a small vector of the same values agree.
  const std::vector<int64_t> empty, zero{0}, v{4, 8};
  EXPECT_NE(hash_identity(std::tie(empty)), hash_identity(std::tie(zero)));
  c10::SmallVector<int64_t, 8> sv{4, 8};
  EXPECT_EQ(hash_identity(std::tie(v)), hash_identity(std::tie(sv)));
  sv.push_back(1);
  EXPECT_NE(hash_identity(std::tie(v)), hash_identity(std::tie(sv)));
  // Order counts, and enums and bools are words like ints.
  const int one = 1, two = 2;
  EXPECT_NE(hash_identity(std::tie(one, two)), hash_identity(std::tie(two, one)));
  const c10::ScalarType bf16 = c10::kBFloat16, half = c10::kHalf;
  EXPECT_NE(hash_identity(std::tie(bf16, sm90)), hash_identity(std::tie(half, sm90)));
  // Ties are references: a spec's identity copies no string.
  using Id = decltype(RowNormSpec{}.identity());
  static_assert(std::is_same_v<std::tuple_element_t<std::tuple_size_v<Id> - 1, Id>, const std::string&>);
}

TEST(SpecIdentity, EveryFieldCountsInEqualityAndHash) {
  RowNormSpec rn{};
  rn.op = RowNormOp::kRmsNorm;
  rn.impl = RowNormImpl::kRegisterResident;
  rn.dtype = c10::kBFloat16;
  rn.n = 4096;
  rn.vec = 8;
  rn.tpr = 128;
  rn.rows = 1;
  rn.cluster = 1;
  rn.weight = true;
  rn.quant = RowNormQuant::kNone;
  rn.qdtype = c10::kChar;
  rn.arch = "sm_90";
  expect_identity<RowNormSpec>(
      rn, {[](auto& s) { s.op = RowNormOp::kLayerNorm; }, [](auto& s) { s.impl = RowNormImpl::kStaged; },
           [](auto& s) { s.dtype = c10::kHalf; }, [](auto& s) { s.n = 8192; }, [](auto& s) { s.vec = 4; },
           [](auto& s) { s.tpr = 64; }, [](auto& s) { s.rows = 2; }, [](auto& s) { s.cluster = 2; },
           [](auto& s) { s.weight = false; }, [](auto& s) { s.bias = true; }, [](auto& s) { s.cache = true; },
           [](auto& s) { s.staged = true; }, [](auto& s) { s.one_pass = true; },
           [](auto& s) { s.float_weight = true; }, [](auto& s) { s.gemma = true; },
           [](auto& s) { s.quant = RowNormQuant::kDynamic; }, [](auto& s) { s.qdtype = c10::kFloat8_e4m3fn; },
           [](auto& s) { s.arch = "sm_80"; }});

  EwSpec ew{};
  ew.op = 0;
  ew.in = {c10::kFloat, c10::kFloat, c10::ScalarType::Undefined, c10::ScalarType::Undefined};
  ew.out = ew.compute = c10::kFloat;
  ew.vec = 4;
  ew.arch = "sm_90";
  expect_identity<EwSpec>(
      ew, {[](auto& s) { s.op = 1; }, [](auto& s) { s.in[1] = c10::kHalf; }, [](auto& s) { s.out = c10::kHalf; },
           [](auto& s) { s.compute = c10::kDouble; }, [](auto& s) { s.rank = 2; }, [](auto& s) { s.vec = 2; },
           [](auto& s) { s.one[1] = true; }, [](auto& s) { s.aligned[0] = true; },
           [](auto& s) { s.staged[1] = true; }, [](auto& s) { s.index64 = true; }, [](auto& s) { s.variant = 1; },
           [](auto& s) { s.unroll = 4; }, [](auto& s) { s.cta_threads = 256; },
           [](auto& s) { s.arch = "sm_80"; }});

  PoolSpec pool{};
  pool.dtype = c10::kBFloat16;
  pool.rank = 2;
  pool.mode = PoolMode::Max;
  pool.index_bits = 32;
  pool.threads = 256;
  pool.arch = "sm_90";
  pool.window = {0, 3, 3, 0, 2, 2, 0, 1, 1, 0, 1, 1};
  expect_identity<PoolSpec>(
      pool, {[](auto& s) { s.dtype = c10::kHalf; }, [](auto& s) { s.rank = 3; },
             [](auto& s) { s.mode = PoolMode::Avg; }, [](auto& s) { s.adaptive = true; },
             [](auto& s) { s.index_bits = 64; }, [](auto& s) { s.threads = 128; }, [](auto& s) { s.arch = "sm_80"; },
             [](auto& s) { s.window[7] = 0; }, [](auto& s) { s.lanes = 8; }, [](auto& s) { s.wide = 2; },
             [](auto& s) { s.single = true; }});

  GroupNormProblem gn{c10::kBFloat16, 64, 32, 4, 1024, 8, true, true, false};
  expect_identity<GroupNormProblem>(
      gn, {[](auto& s) { s.dtype = c10::kFloat; }, [](auto& s) { s.rows = 128; }, [](auto& s) { s.groups = 16; },
           [](auto& s) { s.cpg = 8; }, [](auto& s) { s.hw = 512; }, [](auto& s) { s.max_vec = 4; },
           [](auto& s) { s.weight = false; }, [](auto& s) { s.bias = false; }, [](auto& s) { s.running = true; }});
}

// RowNormProblem's qdtype counts only when the output is quantised (its hand-written identity()).
TEST(SpecIdentity, RowNormProblemQdtypeCountsOnlyWhenQuantised) {
  RowNormProblem a{RowNormOp::kRmsNorm, c10::kBFloat16, 4096, 8, true};
  RowNormProblem b = a;
  b.qdtype = c10::kFloat8_e4m3fn;
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.hash(), b.hash());
  a.quant = b.quant = RowNormQuant::kStatic;
  EXPECT_FALSE(a == b);
  EXPECT_NE(a.hash(), b.hash());
  b.qdtype = a.qdtype;
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.hash(), b.hash());
  b.few_rows = true;
  EXPECT_FALSE(a == b);
  EXPECT_NE(a.hash(), b.hash());
}

}  // namespace

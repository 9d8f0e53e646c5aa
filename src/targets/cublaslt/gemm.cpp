// GemmFwdOp, BmmFwdOp, GemmFp8FwdOp, GemmW4A16FwdOp (its weight dequantised first by an NVRTC kernel),
// GroupedGemmFwdOp (a run of rows at a time), MoE's grouped GEMM and gate-up projection (a run an
// expert) and, pending, the fused MoE layers (both GEMMs a run an expert) on the cublaslt target: one
// cublasLtMatmul per product, planned once per (dtypes, layout flags, operand alignments, batch, M, N,
// K, device).
//
// cuBLASLt is column-major: a row-major [R, C] buffer is its [C, R] matrix. So the row-major product
// d[M, N] = op(a) @ op(b) is asked as d^T[N, M] = op'(b) @ op'(a), b as cuBLASLt's A and a as its B;
// trans_b/trans_a become its TRANSA/TRANSB, and no operand is ever copied or transposed.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "targets/builtin.h"
#include "targets/cublaslt/cublaslt_library.h"
#include "targets/nvrtc/gemm/w4a16.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/reference/gemm.h"
#include "targets/reference/moe.h"
#include "tileops_generated/ops.h"

namespace tileops::cublaslt {
namespace {

namespace gemm = tileops::ops::gemm_fwd;
namespace bmm = tileops::ops::gemm_bmm_fwd;
namespace fp8 = tileops::ops::gemm_fp8_fwd;
namespace w4a16 = tileops::ops::gemm_w4_a16_fwd;
namespace grouped = tileops::ops::gemm_grouped_gemm_fwd;
namespace moe_grouped = tileops::ops::moe_grouped_gemm_nopad_fwd;
namespace moe_gate_up = tileops::ops::moe_gate_up_fwd;
namespace moe_experts = tileops::ops::moe_fused_mo_e_experts_nopad_persistent3_wg_fwd;
namespace moe_fused = tileops::ops::moe_fused_moe_fwd;

// The largest power of two (up to 256 bytes) dividing the address: cuBLASLt picks vectorised
// kernels only for what the pointers allow, and its default assumption is 256.
int64_t align_log2(const at::Tensor& t) {
  const auto p = reinterpret_cast<uintptr_t>(t.data_ptr());
  int log2 = 0;
  while (log2 < 8 && (p & ((uintptr_t(2) << log2) - 1)) == 0) ++log2;
  return log2;
}

// One product, as its build key: word 0 packs the operands' dtype, flags and alignments; then batch,
// M, N, K; word 5 the output's and the bias's dtypes (FP8: the output's is a param; no bias: -1).
struct Product {
  c10::ScalarType dtype;
  bool trans_a, trans_b;
  int64_t align_a, align_b, align_d;  // log2 of bytes
  int64_t batch, m, n, k;
  c10::ScalarType out_dtype = dtype;
  int64_t bias_dtype = -1;
  bool aten = false;  // FP8 that cuBLASLt does not take (block scales, unaligned): ATen serves it

  BuildKey key() const {
    return BuildKey{int64_t(dtype) | int64_t(trans_a) << 8 | int64_t(trans_b) << 9 | align_a << 12 |
                        align_b << 16 | align_d << 20 | int64_t(aten) << 24,
                    batch, m, n, k, int64_t(out_dtype) | (bias_dtype + 1) << 8};
  }
  static Product from(const BuildKey& key) {
    const int64_t w = key.words[0], o = key.words[5];
    return {c10::ScalarType(w & 0xff), bool(w >> 8 & 1), bool(w >> 9 & 1), w >> 12 & 0xf, w >> 16 & 0xf,
            w >> 20 & 0xf, key.words[1], key.words[2], key.words[3], key.words[4], c10::ScalarType(o & 0xff),
            (o >> 8) - 1, bool(w >> 24 & 1)};
  }
  bool is_fp8() const { return dtype == c10::kFloat8_e4m3fn; }
  std::string describe(const char* stem) const {
    if (aten) return std::string(stem) + "__block_scales_or_unaligned (ATen)";
    return std::string(stem) + "__" + c10::toString(dtype) + "__" + (trans_a ? "t" : "n") + (trans_b ? "t" : "n") +
           "__b" + std::to_string(batch) + "_m" + std::to_string(m) + "_n" + std::to_string(n) + "_k" +
           std::to_string(k) + "__align" + std::to_string(1 << std::min({align_a, align_b, align_d})) + " (cuBLASLt)";
  }
};

cudaDataType_t data_type(c10::ScalarType t) {
  switch (t) {
    case c10::kHalf: return CUDA_R_16F;
    case c10::kBFloat16: return CUDA_R_16BF;
    case c10::kFloat: return CUDA_R_32F;
    case c10::kFloat8_e4m3fn: return CUDA_R_8F_E4M3;
    default: TORCH_CHECK(false, "tileops: target 'cublaslt' has no GEMM for dtype ", t);
  }
}

class LtMatmul final : public Kernel {
 public:
  LtMatmul(const char* op, const Product& p, c10::DeviceIndex device) : op_(op), p_(p) {
    if (p.aten || p.batch == 0 || p.m == 0 || p.n == 0 || p.k == 0) return;  // nothing to plan
    const LtApi& api = lt();
    handle_ = handle(device);
    const cudaDataType_t t = data_type(p.dtype), t_out = data_type(p.out_dtype);
    // float32 accumulation for every dtype (no TF32 for float32: torch.matmul's default precision).
    check(api.desc_create(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), op, "cublasLtMatmulDescCreate");
    const cublasOperation_t op_b = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // b is cuBLASLt's A
    const cublasOperation_t op_a = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(api.desc_set(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)), op, "set TRANSA");
    check(api.desc_set(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)), op, "set TRANSB");
    if (p.bias_dtype >= 0) {  // added in float32 before the one rounding; one value per row of d^T
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bias_type = data_type(c10::ScalarType(p.bias_dtype));
      check(api.desc_set(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)), op, "set EPILOGUE");
      check(api.desc_set(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)), op,
            "set BIAS_DATA_TYPE");
    }
    // Column-major shapes of the stored buffers: b is [K, N] (or [N, K] with trans_b), a is [M, K]
    // (or [K, M] with trans_a), d is [M, N]; the leading dimension is the row length.
    lt_a_ = layout(t, p.trans_b ? p.k : p.n, p.trans_b ? p.n : p.k, p.k * p.n);
    lt_b_ = layout(t, p.trans_a ? p.m : p.k, p.trans_a ? p.k : p.m, p.m * p.k);
    lt_d_ = layout(t_out, p.n, p.m, p.m * p.n);
    algo_ = plan(workspace_bytes(device), &needs_);
    size_t unused = 0;
    algo_without_workspace_ = plan(0, &unused);
  }

  ~LtMatmul() override {
    if (!desc_) return;
    const LtApi& api = lt();
    for (cublasLtMatrixLayout_t l : {lt_a_, lt_b_, lt_d_}) api.layout_destroy(l);
    api.desc_destroy(desc_);
  }

  void launch(const OpCall& call) const override {
    if (p_.aten) return reference::gemm_fp8_fwd_aten(call);
    const at::Tensor& a = call.inputs[0];
    const at::Tensor& b = call.inputs[1];
    const at::Tensor& d = call.outputs[0];
    if (p_.m == 0 || p_.n == 0 || p_.batch == 0) return;
    if (p_.k == 0) {
      if (p_.is_fp8()) return reference::gemm_fp8_fwd_aten(call);  // d is the bias, or zeros
      d.zero_();
      return;
    }
    // FP8: the scales and the bias are pointers of this call. The descriptor is shared, so setting
    // them and enqueueing is one critical section (cublasLtMatmul reads the descriptor on the host).
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (p_.is_fp8()) {
      const fp8::View v(call);
      const void* scale_b = v.scale_b().data_ptr();  // cuBLASLt's A is b
      const void* scale_a = v.scale_a().data_ptr();
      lock.lock();
      check(lt().desc_set(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_b, sizeof(scale_b)), op_,
            "set A_SCALE_POINTER");
      check(lt().desc_set(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_a, sizeof(scale_a)), op_,
            "set B_SCALE_POINTER");
      if (const at::Tensor* bias = v.bias()) {
        const void* ptr = bias->data_ptr();
        check(lt().desc_set(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof(ptr)), op_, "set BIAS_POINTER");
      }
    }
    const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(call.device.index());
    const Workspace ws = workspace(stream);
    const bool with_ws = ws.size >= needs_;
    const float alpha = 1.0f, beta = 0.0f;
    check(lt().matmul(handle_, desc_, &alpha, b.data_ptr(), lt_a_, a.data_ptr(), lt_b_, &beta, d.data_ptr(), lt_d_,
                      d.data_ptr(), lt_d_, with_ws ? &algo_ : &algo_without_workspace_, with_ws ? ws.ptr : nullptr,
                      with_ws ? ws.size : 0, stream.stream()),
          op_, "cublasLtMatmul");
  }

 private:
  cublasLtMatrixLayout_t layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t batch_stride) const {
    cublasLtMatrixLayout_t l = nullptr;
    check(lt().layout_create(&l, t, uint64_t(rows), uint64_t(cols), std::max<int64_t>(rows, 1)), op_,
          "cublasLtMatrixLayoutCreate");
    if (p_.batch > 1) {
      const int32_t count = int32_t(p_.batch);
      check(lt().layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)), op_, "set BATCH_COUNT");
      check(lt().layout_set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride, sizeof(batch_stride)), op_,
            "set STRIDED_BATCH_OFFSET");
    }
    return l;
  }

  // The heuristic's first choice for a workspace of at most `max_ws` bytes; its size in *needs.
  cublasLtMatmulAlgo_t plan(size_t max_ws, size_t* needs) const {
    const LtApi& api = lt();
    cublasLtMatmulPreference_t pref = nullptr;
    check(api.pref_create(&pref), op_, "cublasLtMatmulPreferenceCreate");
    std::unique_ptr<void, void (*)(void*)> guard(pref, [](void* q) {
      lt().pref_destroy(static_cast<cublasLtMatmulPreference_t>(q));
    });
    check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof(max_ws)), op_, "set workspace");
    // Split-K partial sums stay in float32 (never rounded to the output dtype in between).
    const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof(reduction)), op_,
          "set REDUCTION_SCHEME_MASK");
    const uint32_t align_a = 1u << p_.align_b, align_b = 1u << p_.align_a, align_d = 1u << p_.align_d;
    check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)), op_, "set align A");
    check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)), op_, "set align B");
    check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d)), op_, "set align C");
    check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d)), op_, "set align D");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    check(api.heuristic(handle_, desc_, lt_a_, lt_b_, lt_d_, lt_d_, pref, 1, &result, &found), op_,
          "cublasLtMatmulAlgoGetHeuristic");
    TORCH_CHECK(found > 0 && result.state == CUBLAS_STATUS_SUCCESS, op_, ": cuBLASLt has no algorithm for ",
                p_.describe(op_), " with ", max_ws, " bytes of workspace");
    *needs = result.workspaceSize;
    return result.algo;
  }

  const char* op_;
  Product p_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t lt_a_ = nullptr, lt_b_ = nullptr, lt_d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{}, algo_without_workspace_{};
  size_t needs_ = 0;
  mutable std::mutex mu_;  // FP8 calls: their pointers in the shared descriptor
};

// GemmW4A16FwdOp beyond decode sizes: the weight dequantised to the activation's dtype once a call
// (the op's own rounding: one pass of the NVRTC kernel src/kernels/gemm/w4a16_dequant.cuh where the
// weight is its shape, else the reference's ATen formula; Product::aten), then one cuBLASLt GEMM with
// float32 sums, a [M, K] by w [N, K].
class LtW4A16 final : public Kernel {
 public:
  LtW4A16(const Product& p, c10::DeviceIndex device) : gemm_(w4a16::kName, with_gemm(p), device) {
    if (!p.aten) dequant_ = nvrtc::load(nvrtc::w4a16_dequant_source(p.dtype, nvrtc::device_info(device).arch), device);
  }
  void launch(const OpCall& call) const override {
    const w4a16::View v(call);
    const std::array<at::Tensor, 2> operands{v.activation(), dequantized(call, v)};
    const std::array<at::Tensor, 1> out{v.output()};
    gemm_.launch(OpCall{call.op_id, call.op_name, call.device, operands, out, {}});
  }

 private:
  static Product with_gemm(Product p) {
    p.aten = false;  // the GEMM is cuBLASLt's either way
    return p;
  }
  at::Tensor dequantized(const OpCall& call, const w4a16::View& v) const {
    if (!dequant_) return reference::w4a16_dequantized_weight(call);
    const at::Tensor& packed = v.packed_weight();
    at::Tensor w = at::empty({packed.size(0), v.activation().size(1)}, v.activation().options());
    long long words = w.numel() / 8;
    if (words == 0) return w;
    const void *wp = packed.const_data_ptr(), *sp = v.weight_scale().const_data_ptr(),
               *zp = v.weight_zero().const_data_ptr();
    void* op = w.mutable_data_ptr();
    int k = static_cast<int>(w.size(1)), group = static_cast<int>(v.group_size()),
        groups = static_cast<int>(v.weight_scale().size(1));
    void* args[] = {&wp, &sp, &zp, &op, &words, &k, &group, &groups};
    nvrtc::launch(*dequant_, static_cast<unsigned>((words + nvrtc::kW4A16DequantThreads - 1) / nvrtc::kW4A16DequantThreads),
                  nvrtc::kW4A16DequantThreads, 0, args);
    return w;
  }

  LtMatmul gemm_;
  std::optional<nvrtc::LoadedKernel> dequant_;
};

// Runs of rows read on the host (as the reference does), in row order, then one cuBLASLt GEMM a run:
// out[run] = a[run] @ op(b[group]); rows no run covers are zeroed. Each run's (rows, alignments) is
// planned once and kept.
class LtRuns {
 public:
  LtRuns(const char* op, const Product& p, c10::DeviceIndex device) : op_(op), p_(p), device_(device) {}
  void launch(const OpCall& call, const std::vector<reference::GroupRun>& runs, const at::Tensor& a,
              const at::Tensor& b, at::Tensor out) const {
    int64_t next = 0;  // the first row not yet written
    for (const reference::GroupRun& r : runs) {
      if (r.first > next) out.narrow(0, next, r.first - next).zero_();
      next = r.first + r.rows;
      const at::Tensor ar = a.narrow(0, r.first, r.rows), br = b[r.group], dr = out.narrow(0, r.first, r.rows);
      Product q = p_;
      q.m = r.rows, q.align_a = align_log2(ar), q.align_b = align_log2(br), q.align_d = align_log2(dr);
      const std::array<at::Tensor, 2> operands{ar, br};
      const std::array<at::Tensor, 1> d{dr};
      product(q).launch(OpCall{call.op_id, call.op_name, call.device, operands, d, {}});
    }
    if (out.size(0) > next) out.narrow(0, next, out.size(0) - next).zero_();
  }

 private:
  const LtMatmul& product(const Product& q) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<LtMatmul>& slot = plans_[{q.m, q.align_a, q.align_b, q.align_d}];
    if (!slot) slot = std::make_unique<LtMatmul>(op_, q, device_);
    return *slot;
  }

  const char* op_;
  Product p_;  // rows and alignments per run
  c10::DeviceIndex device_;
  mutable std::mutex mu_;
  mutable std::map<std::array<int64_t, 4>, std::unique_ptr<LtMatmul>> plans_;
};

// GroupedGemmFwdOp: a run of rows a group.
class LtGroupedGemm final : public Kernel {
 public:
  LtGroupedGemm(const Product& p, c10::DeviceIndex device) : runs_(grouped::kName, p, device) {}
  void launch(const OpCall& call) const override {
    const grouped::View v(call);
    runs_.launch(call, reference::group_runs(call.op_name, v.batch_sizes(), v.batch_offsets(), v.a().size(0)), v.a(),
                 v.b(), v.output());
  }

 private:
  LtRuns runs_;
};

// MoeGroupedGemmNopadFwdOp: a run of rows an expert, c[run] = a[run] @ b[e].T.
class LtMoeGroupedGemm final : public Kernel {
 public:
  LtMoeGroupedGemm(const Product& p, c10::DeviceIndex device) : runs_(moe_grouped::kName, p, device) {}
  void launch(const OpCall& call) const override {
    const moe_grouped::View v(call);
    runs_.launch(call, reference::expert_runs(call.op_name, v.true_sizes(), v.true_offsets(), v.a().size(0)), v.a(),
                 v.b(), v.c());
  }

 private:
  LtRuns runs_;
};

// MoeGateUpFwdOp: the gate and up projections of each run into float32 (cuBLASLt writes its float32
// sums unrounded), then the gated activation in float32, rounded once into c (the reference's formula).
class LtMoeGateUp final : public Kernel {
 public:
  LtMoeGateUp(const Product& p, c10::DeviceIndex device) : runs_(moe_gate_up::kName, p, device) {}
  void launch(const OpCall& call) const override {
    const moe_gate_up::View v(call);
    const at::Tensor &a = v.a(), &b = v.b();
    at::Tensor both = at::empty({a.size(0), b.size(1)}, a.options().dtype(at::kFloat));
    runs_.launch(call, reference::expert_runs(call.op_name, v.true_sizes(), v.true_offsets(), a.size(0)), a, b, both);
    at::Tensor c = v.c();
    c.copy_(reference::gated(both, v.activation()));
  }

 private:
  LtRuns runs_;
};

// FusedMoEExpertsNopadPersistent3WGFwdOp and FusedMoeFwdOp: the reference's routing (read on the host),
// the routes gathered by expert, then gate-up and down as one cuBLASLt GEMM an expert's run each, with
// the reference's rounding chain: act(gate) * up in float32 rounded to the dtype, the down product
// rounded to the dtype, the float32 sum of weight times that over a token's routes, times the scale,
// rounded once into the output.
class LtFusedExperts final : public Kernel {
 public:
  LtFusedExperts(const char* op, const Product& gate_up, const Product& down, c10::DeviceIndex device,
                 bool route_scores)
      : gate_up_(op, gate_up, device), down_(op, down, device), route_scores_(route_scores) {}
  void launch(const OpCall& call) const override {
    // Both ops' views: hidden_states, w_gate_up, w_down, routed_scaling_factor, activation, output.
    const reference::ExpertRouting r =
        route_scores_ ? reference::fused_moe_routing(call) : reference::fused_experts_routing(call);
    if (route_scores_) run<moe_fused::View>(call, r);
    else run<moe_experts::View>(call, r);
  }

 private:
  template <class View>
  void run(const OpCall& call, const reference::ExpertRouting& r) const {
    const View v(call);
    const at::Tensor &hidden = v.hidden_states(), &w_gate_up = v.w_gate_up(), &w_down = v.w_down();
    at::Tensor out = v.output();
    const int64_t top_k = r.weights.size(1), experts = w_gate_up.size(0), ffn = w_down.size(2);
    // the routes in expert order (ascending inside an expert), and each expert's run of them
    std::vector<int64_t> order;
    std::vector<reference::GroupRun> runs;
    const auto by_expert = reference::routes_by_expert(r.local, experts);
    for (int64_t e = 0; e < experts; ++e) {
      if (by_expert[e].empty()) continue;
      runs.push_back({e, static_cast<int64_t>(order.size()), static_cast<int64_t>(by_expert[e].size())});
      order.insert(order.end(), by_expert[e].begin(), by_expert[e].end());
    }
    at::Tensor acc = at::zeros({hidden.size(0), hidden.size(1)}, hidden.options().dtype(at::kFloat));
    if (!order.empty()) {
      const at::Tensor f = at::from_blob(order.data(), {static_cast<int64_t>(order.size())},
                                         at::TensorOptions().dtype(at::kLong)).to(hidden.device());
      const at::Tensor token = f.div(top_k, "floor");
      const at::Tensor x = hidden.index_select(0, token);
      at::Tensor both = at::empty({x.size(0), 2 * ffn}, hidden.options().dtype(at::kFloat));
      gate_up_.launch(call, runs, x, w_gate_up, both);
      const at::Tensor act = reference::gated(both, v.activation()).to(hidden.scalar_type());
      at::Tensor down = at::empty({x.size(0), hidden.size(1)}, hidden.options());
      down_.launch(call, runs, act, w_down, down);
      acc.index_add_(0, token, down.to(at::kFloat) * r.weights.to(at::kFloat).reshape({-1}).index_select(0, f).unsqueeze(1));
    }
    if (v.routed_scaling_factor() != 1.0) acc.mul_(v.routed_scaling_factor());
    out.copy_(acc);
  }

  LtRuns gate_up_, down_;
  bool route_scores_;  // FusedMoeFwdOp: routes from the router's logits
};

template <class IdentityFn>
KernelBuilder lt_builder(const char* op, const char* stem, IdentityFn identity) {
  KernelBuilder b;
  b.identity = [identity](const OpCall& call) {
    TORCH_CHECK(call.device.is_cuda(), call.op_name, ": target 'cublaslt' serves CUDA tensors only, got ",
                call.device.str());
    return identity(call).key();
  };
  b.build = [op](const OpCall& call, const BuildKey& key) -> std::shared_ptr<const Kernel> {
    return std::make_shared<LtMatmul>(op, Product::from(key), call.device.index());
  };
  b.describe = [stem](const BuildKey& key) { return Product::from(key).describe(stem); };
  return b;
}

KernelBuilder gemm_fwd_builder() {
  return lt_builder(gemm::kName, "gemm_fwd", [](const OpCall& call) {
    const gemm::View v(call);
    const at::Tensor &a = v.a(), &b = v.b();
    const bool ta = v.trans_a(), tb = v.trans_b();
    return Product{a.scalar_type(), ta, tb, align_log2(a), align_log2(b), align_log2(v.d()), 1,
                   a.size(ta ? 1 : 0), b.size(tb ? 0 : 1), a.size(ta ? 0 : 1)};
  });
}

KernelBuilder bmm_fwd_builder() {
  return lt_builder(bmm::kName, "bmm_fwd", [](const OpCall& call) {
    const bmm::View v(call);
    const at::Tensor &a = v.a(), &b = v.b();
    return Product{a.scalar_type(), false, false, align_log2(a), align_log2(b), align_log2(v.d()),
                   a.size(0), a.size(1), b.size(2), a.size(2)};
  });
}

// cuBLASLt's FP8 path: per-tensor scales, K and N multiples of 16, 16-byte aligned operands, a bias
// in the output's dtype. Anything else runs the reference's ATen formula inside this kernel.
KernelBuilder gemm_fp8_fwd_builder() {
  return lt_builder(fp8::kName, "gemm_fp8_fwd", [](const OpCall& call) {
    const fp8::View v(call);
    const at::Tensor &a = v.a(), &b = v.b(), &d = v.d();
    const at::Tensor* bias = v.bias();
    Product p{a.scalar_type(), false, true, align_log2(a), align_log2(b), align_log2(d), 1, a.size(0), b.size(0),
              a.size(1), d.scalar_type(), bias ? int64_t(bias->scalar_type()) : -1};
    const bool aligned = std::min({p.align_a, p.align_b, p.align_d, bias ? align_log2(*bias) : 8}) >= 4;
    p.aten = v.scale_a().numel() != 1 || v.scale_b().numel() != 1 || p.k % 16 != 0 || p.n % 16 != 0 || !aligned ||
             (bias && bias->scalar_type() != d.scalar_type());
    if (p.aten) p = Product{a.scalar_type(), false, true, 0, 0, 0, 0, 0, 0, 0, d.scalar_type(), -1, true};
    return p;
  });
}

// The dequantised weight is a fresh allocation: 256-byte aligned (log2 8) whatever the inputs' offsets.
// Product::aten: the weight is dequantised by ATen (a shape the NVRTC dequantising kernel does not take).
KernelBuilder gemm_w4a16_fwd_builder() {
  KernelBuilder b = lt_builder(w4a16::kName, "gemm_w4a16_fwd", [](const OpCall& call) {
    const w4a16::View v(call);
    const at::Tensor &x = v.activation(), &packed = v.packed_weight();
    Product p{x.scalar_type(), false, true, align_log2(x), 8, align_log2(v.output()), 1,
              x.size(0), packed.size(0), x.size(1)};
    const int sm = nvrtc::device_info(call.device.index()).sm();
    p.aten = !nvrtc::w4a16_dequant_applies(p.dtype, p.k, v.group_size(), align_log2(packed) >= 2, sm) || p.k > 0x7fffffffLL ||
             p.n * p.k / 8 > 0x7fffffffLL * nvrtc::kW4A16DequantThreads;  // the grid's x limit
    return p;
  });
  b.build = [](const OpCall& call, const BuildKey& key) -> std::shared_ptr<const Kernel> {
    return std::make_shared<LtW4A16>(Product::from(key), call.device.index());
  };
  b.describe = [](const BuildKey& key) {
    const Product p = Product::from(key);
    Product g = p;
    g.aten = false;
    return g.describe("gemm_w4a16_fwd") + (p.aten ? " after ATen's dequantisation" : " after w4a16_dequant (NVRTC)");
  };
  return b;
}

// One kernel a (dtype, layout, N, K): the runs' rows and alignments are planned inside it.
KernelBuilder grouped_gemm_fwd_builder() {
  KernelBuilder b = lt_builder(grouped::kName, "grouped_gemm_fwd", [](const OpCall& call) {
    const grouped::View v(call);
    const at::Tensor &a = v.a(), &b = v.b();
    const bool tb = v.transpose_b();
    TORCH_CHECK(!v.transpose_a(), call.op_name, ": target 'cublaslt' takes transpose_a=False only");
    return Product{a.scalar_type(), false, tb, 8, 8, 8, 1, 0, b.size(tb ? 1 : 2), b.size(tb ? 2 : 1)};
  });
  b.build = [](const OpCall& call, const BuildKey& key) -> std::shared_ptr<const Kernel> {
    return std::make_shared<LtGroupedGemm>(Product::from(key), call.device.index());
  };
  return b;
}

// MoE's runs: b is [E, n, k] (b[e].T), one kernel a (dtype, n, k); gate-up's output is float32.
template <class K>
KernelBuilder expert_runs_builder(const char* op, const char* stem, c10::ScalarType out) {
  KernelBuilder b = lt_builder(op, stem, [out](const OpCall& call) {
    const at::Tensor &a = call.inputs[0], &b = call.inputs[1];
    const c10::ScalarType d = out == c10::ScalarType::Undefined ? a.scalar_type() : out;
    return Product{a.scalar_type(), false, true, 8, 8, 8, 1, 0, b.size(1), b.size(2), d};
  });
  b.build = [](const OpCall& call, const BuildKey& key) -> std::shared_ptr<const Kernel> {
    return std::make_shared<K>(Product::from(key), call.device.index());
  };
  return b;
}
KernelBuilder moe_grouped_gemm_builder() {
  return expert_runs_builder<LtMoeGroupedGemm>(moe_grouped::kName, "moe_grouped_gemm_nopad_fwd",
                                               c10::ScalarType::Undefined);
}
KernelBuilder moe_gate_up_builder() {
  return expert_runs_builder<LtMoeGateUp>(moe_gate_up::kName, "moe_gate_up_fwd", c10::kFloat);
}

// One kernel a (dtype, hidden, ffn): gate-up's GEMMs (n = 2 * ffn, k = hidden, float32 out) and down's
// (n = hidden, k = ffn, the dtype out), planned per run length inside it; words 1-4 of the key hold
// the gate-up product's (batch 1, M 0, n, k) and word 5 down's k.
template <class View>
KernelBuilder fused_experts_builder(const char* op, const char* stem, bool route_scores) {
  KernelBuilder b;
  b.identity = [](const OpCall& call) {
    TORCH_CHECK(call.device.is_cuda(), call.op_name, ": target 'cublaslt' serves CUDA tensors only, got ",
                call.device.str());
    const View v(call);
    const at::Tensor &w_gate_up = v.w_gate_up(), &w_down = v.w_down();
    BuildKey key = Product{w_gate_up.scalar_type(), false, true, 8, 8, 8, 1, 0, w_gate_up.size(1), w_gate_up.size(2),
                           c10::kFloat}.key();
    key.words[5] = w_down.size(2);
    return key;
  };
  b.build = [op, route_scores](const OpCall& call, const BuildKey& key) -> std::shared_ptr<const Kernel> {
    BuildKey gk = key;
    gk.words[5] = int64_t(c10::kFloat);
    const Product gate_up = Product::from(gk);
    const Product down{gate_up.dtype, false, true, 8, 8, 8, 1, 0, gate_up.k, key.words[5], gate_up.dtype};
    return std::make_shared<LtFusedExperts>(op, gate_up, down, call.device.index(), route_scores);
  };
  b.describe = [stem](const BuildKey& key) {
    return std::string(stem) + "__" + c10::toString(c10::ScalarType(key.words[0] & 0xff)) + "__hidden" +
           std::to_string(key.words[4]) + "_ffn" + std::to_string(key.words[5]) + " (cuBLASLt, a GEMM an expert)";
  };
  return b;
}

TILEOPS_BUILTIN_KERNEL(cublaslt, GemmFwdOp, gemm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(cublaslt, GroupedGemmFwdOp, grouped_gemm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(cublaslt, GemmW4A16FwdOp, gemm_w4a16_fwd_builder);
TILEOPS_BUILTIN_KERNEL(cublaslt, GemmFp8FwdOp, gemm_fp8_fwd_builder);
TILEOPS_BUILTIN_KERNEL(cublaslt, BmmFwdOp, bmm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(cublaslt, MoeGroupedGemmNopadFwdOp, moe_grouped_gemm_builder);
TILEOPS_BUILTIN_KERNEL(cublaslt, MoeGateUpFwdOp, moe_gate_up_builder);
KernelBuilder fused_moe_experts_builder() {
  return fused_experts_builder<moe_experts::View>(moe_experts::kName, "fused_moe_experts", false);
}
KernelBuilder fused_moe_builder() { return fused_experts_builder<moe_fused::View>(moe_fused::kName, "fused_moe", true); }
TILEOPS_PENDING_KERNEL(cublaslt, FusedMoEExpertsNopadPersistent3WGFwdOp, fused_moe_experts_builder);
TILEOPS_PENDING_KERNEL(cublaslt, FusedMoeFwdOp, fused_moe_builder);

}  // namespace
}  // namespace tileops::cublaslt

#include "targets/nvrtc/norm_rms_norm_fwd.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cfloat>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::norm_rms_norm_fwd;


float eps_of(const OpCall& call, const RmsNormSlots& s) {
  // F.rms_norm: eps=None is torch.finfo(float32).eps for float16/bfloat16/float32 inputs.
  const auto eps = call.params[s.eps].as_optional_real();
  return eps ? static_cast<float>(*eps) : FLT_EPSILON;
}

const void* ptr_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

int alignment_vec(const OpCall& call, const RmsNormSlots& s, int elem) {
  const bool res = s.residual >= 0;
  return access_width({call.inputs[s.x].data_ptr(), call.outputs[s.y].data_ptr(), ptr_or_null(call.inputs[s.weight]),
                       res ? call.inputs[s.residual].data_ptr() : nullptr,
                       res ? call.outputs[s.residual_out].data_ptr() : nullptr},
                      elem);
}

class RmsNormKernel final : public Kernel {
 public:
  RmsNormKernel(LoadedKernel k, RmsNormPlan p, RmsNormSlots s, StagedWalk walk)
      : k_(std::move(k)), p_(p), s_(s), walk_(walk) {}
  void launch(const OpCall& call) const override {
    const void* x = call.inputs[s_.x].const_data_ptr();
    const void* w = p_.has_weight ? call.inputs[s_.weight].const_data_ptr() : nullptr;
    void* y = call.outputs[s_.y].mutable_data_ptr();
    long long rows = call.inputs[s_.x].numel() / p_.n;
    const long long grid = p_.cluster > 1 ? rows * p_.cluster
                           : p_.staged    ? walk_.grid(rows)
                                          : (rows + p_.rows - 1) / p_.rows;
    TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many rows (", rows, ") for one launch");
    const void* r_in = p_.add_residual ? call.inputs[s_.residual].const_data_ptr() : nullptr;
    void* r_out = p_.add_residual ? call.outputs[s_.residual_out].mutable_data_ptr() : nullptr;  // residual when in place
    void* plain[] = {&x, &w, &y, &rows};
    void* fused[] = {&x, &r_in, &r_out, &w, &y, &rows};
    void** args = p_.add_residual ? fused : plain;
    const auto block = static_cast<unsigned>(p_.tpr * p_.rows);
    const auto smem = static_cast<unsigned>(walk_.smem_bytes(rows));
    if (p_.cluster > 1)
      nvrtc::launch_cluster(k_, static_cast<unsigned>(grid), block, static_cast<unsigned>(p_.cluster), smem, args);
    else
      nvrtc::launch(k_, static_cast<unsigned>(grid), block, smem, args);
  }

 private:
  LoadedKernel k_;
  RmsNormPlan p_;
  RmsNormSlots s_;
  StagedWalk walk_;  // staged rows without a cluster: persistent CTAs; otherwise only slot_bytes
};

int elem_size(c10::ScalarType t) { return static_cast<int>(c10::elementSize(t)); }

// Register-resident and streaming share one kernel and one thread layout: about 4 vectors per thread
// on up to 256 threads a row, then up to 8 (registers still hold the row), then wider CTAs. Measured
// on the H200 (docs/PERF.md): 512-thread rows of 4 vectors ran 4096x16384 bf16 at 0.69 of copy, 256
// threads of 8 vectors at 0.97. TILEOPS_RMS_VECS_PER_THREAD overrides the first target for tuning
// experiments (read once).
void plan_row_per_cta(RmsNormPlan& p, bool cache) {
  static const int kTarget = [] {
    const char* env = std::getenv("TILEOPS_RMS_VECS_PER_THREAD");
    const int v = env ? std::atoi(env) : 0;
    return v >= 1 && v <= 16 ? v : 4;
  }();
  const int64_t vecs = p.n / p.vec;
  p.tpr = std::min<int>(256, next_pow2((vecs + kTarget - 1) / kTarget));
  if ((vecs + p.tpr - 1) / p.tpr > 8) p.tpr = std::min<int>(1024, next_pow2((vecs + 7) / 8));
  // Groups wider than a warp reduce through shared memory and own their CTA.
  p.rows = p.tpr > 32 ? 1 : 256 / p.tpr;
  p.cache = cache;
}

// Cluster: plan_row_cluster (nvrtc_target.h) spreads the row over 2..8 CTAs of at most 32 KB each.
// With 16-byte accesses the chunk is staged in shared memory (bulk copies; with the fused add, the
// residual's chunk too), at about 16 vectors a thread: 64x131072 bf16 ran 11.1 us vs 12.3 at 8 and
// 12.7 at 4 (H200 sweep, docs/PERF.md; TILEOPS_STAGED_VPT overrides, read once).
constexpr int64_t kStagedMaxSmem = 131072;  // of the 227 KB an sm_90 CTA may opt into
bool plan_cluster(RmsNormPlan& p) {
  static const int kStagedPerThread = env_int("TILEOPS_STAGED_VPT", 16, 1, 32);
  RowCluster rc{};
  // 32 KB a CTA, at most 8 CTAs: 16 KB / 16 CTAs measured slower for 64x131072 (docs/PERF.md).
  const int64_t vecs = p.n / p.vec;
  const bool fits = plan_row_cluster(vecs, p.vec * elem_size(p.dtype), 32768, 8, rc);
  p.cluster = rc.cluster;
  p.tpr = rc.tpb;
  p.rows = 1;
  p.cache = true;
  const int64_t chunk = (vecs + p.cluster - 1) / p.cluster;
  p.staged = p.vec * elem_size(p.dtype) == 16 && chunk * 16 * (p.add_residual ? 2 : 1) <= kStagedMaxSmem;
  if (p.staged) {
    p.tpr = std::clamp(next_pow2((chunk + kStagedPerThread - 1) / kStagedPerThread), 32, 1024);
  }
  return fits;
}

// Staged rows (kStaged): the fused add's rows of 32 KB to 64 KB at 8 vectors a thread, RMSNorm's
// rows of 16 KB to 32 KB at 2 (TILEOPS_STAGED_MIN_ROW_BYTES / TILEOPS_STAGED_ROW_VPT override both).
// H200 sweeps (docs/PERF.md), bf16: fused add 4096x16384 134.9 us vs 139.2 in registers, but
// 2048x8192 36.6 vs 35.1; RMSNorm 2048x8192 18.5 / 18.4 us vs 19.0 / 19.1 in registers, 4096x16384
// 66.7 / 66.7 vs 68.4 / 68.8 (at 8 a thread staged rows were slower: 19.2, 68.9); 8 KB rows stay in
// registers (8.6 either way).
constexpr int kFusedAddStagedMinRowBytes = 32768;
constexpr int kFusedAddStagedPerThread = 8;
constexpr int kRmsNormStagedMinRowBytes = 16384;
constexpr int kRmsNormStagedMaxRowBytes = 32768;  // longer rows were not measured staged
constexpr int kRmsNormStagedPerThread = 2;

RmsNormPlan base_plan(const RmsNormProblem& q) {
  RmsNormPlan p{};
  p.dtype = q.dtype;
  p.n = static_cast<int>(q.n);
  p.vec = q.vec;
  return p;
}

// Rows up to 64 KB: one CTA holds the row in at most 16 registers a thread. Longer rows in one CTA
// (1024 threads, 32 registers each) ran below 0.7 of copy on the H200, and leave SMs idle when rows
// are few; the cluster serves them.
bool register_resident_applies(const RmsNormProblem& q) {
  return q.n * elem_size(q.dtype) <= 65536;
}
bool cluster_applies(const RmsNormProblem& q) {
  if (q.cc_major < 9) return false;
  RmsNormPlan p = base_plan(q);
  return plan_cluster(p);
}
bool streaming_applies(const RmsNormProblem&) { return true; }
bool staged_applies(const RmsNormProblem& q) {
  if (q.add_residual) return staged_row_applies(q.dtype, q.n, q.vec, q.cc_major, kFusedAddStagedMinRowBytes);
  return staged_row_applies(q.dtype, q.n, q.vec, q.cc_major, kRmsNormStagedMinRowBytes) &&
         q.n * elem_size(q.dtype) <= kRmsNormStagedMaxRowBytes;
}

constexpr uint32_t bit(RmsNormImpl i) { return 1u << static_cast<int>(i); }

RmsNormProblem problem_of(c10::ScalarType dtype, int64_t n, int max_vec, int cc_major, bool add_residual) {
  return RmsNormProblem{dtype, n, row_access_width(dtype, n, max_vec), cc_major, add_residual};
}

}  // namespace

const std::vector<Implementation<RmsNormProblem>>& rms_norm_implementations() {
  static const std::vector<Implementation<RmsNormProblem>> impls{
      {static_cast<int>(RmsNormImpl::kRegisterResident), "register-resident", register_resident_applies,
       bit(RmsNormImpl::kCluster) | bit(RmsNormImpl::kStreaming), false},
      {static_cast<int>(RmsNormImpl::kCluster), "cluster", cluster_applies, bit(RmsNormImpl::kStreaming), true},
      {static_cast<int>(RmsNormImpl::kStreaming), "streaming", streaming_applies, 0u, false},
      {static_cast<int>(RmsNormImpl::kStaged), "staged", staged_applies,
       bit(RmsNormImpl::kRegisterResident) | bit(RmsNormImpl::kCluster) | bit(RmsNormImpl::kStreaming), true},
  };
  return impls;
}

const char* rms_norm_impl_name(RmsNormImpl impl) {
  for (const auto& i : rms_norm_implementations())
    if (i.id == static_cast<int>(impl)) return i.name;
  return "?";
}

RmsNormPlan plan_rms_norm(c10::ScalarType dtype, int64_t n, bool has_weight, float eps, int max_vec,
                          bool add_residual, int cc_major) {
  const RmsNormProblem q = problem_of(dtype, n, max_vec, cc_major, add_residual);
  RmsNormPlan p = base_plan(q);
  p.add_residual = add_residual;
  p.has_weight = has_weight;
  p.eps_bits = float_bits(eps);
  p.impl = static_cast<RmsNormImpl>(
      select_implementation(add_residual ? "tileops::norm_fused_add_rms_norm_fwd" : "tileops::norm_rms_norm_fwd",
                            rms_norm_implementations(), q).id);
  switch (p.impl) {
    case RmsNormImpl::kRegisterResident: plan_row_per_cta(p, true); break;
    case RmsNormImpl::kCluster: plan_cluster(p); break;
    case RmsNormImpl::kStreaming: plan_row_per_cta(p, false); break;
    case RmsNormImpl::kStaged:
      plan_staged(p, add_residual ? kFusedAddStagedPerThread : kRmsNormStagedPerThread);
      break;
  }
  return p;
}

void plan_staged(RmsNormPlan& p, int per_thread) {
  p.staged = true;
  p.cluster = 1;
  p.rows = 1;
  p.cache = true;
  p.tpr = staged_row_threads(p.n / p.vec, per_thread);
}

bool staged_row_applies(c10::ScalarType dtype, int64_t n, int vec, int cc_major, int min_row_bytes) {
  static const int kMinKnob = env_int("TILEOPS_STAGED_MIN_ROW_BYTES", 0, 16, 1 << 30);
  const int64_t bytes = n * elem_size(dtype);
  return cc_major >= 9 && vec * elem_size(dtype) == 16 && bytes >= (kMinKnob ? kMinKnob : min_row_bytes) &&
         bytes <= 65536;
}

int staged_row_threads(int64_t vecs, int per_thread) {
  static const int kKnob = env_int("TILEOPS_STAGED_ROW_VPT", 0, 1, 32);
  const int v = kKnob ? kKnob : per_thread;
  return std::clamp(next_pow2((vecs + v - 1) / v), 32, 1024);
}

int rms_norm_smem_bytes(const RmsNormPlan& p) {
  if (!p.staged) return 0;
  const int64_t vecs = p.n / p.vec;
  return static_cast<int>((vecs + p.cluster - 1) / p.cluster * 16 * (p.add_residual ? 2 : 1));
}

std::string rms_norm_name(const RmsNormPlan& p, const std::string& arch) {
  std::string layout = "_t" + std::to_string(p.tpr) + "_r" + std::to_string(p.rows);
  if (p.impl == RmsNormImpl::kCluster || p.staged)
    layout = "_b" + std::to_string(p.tpr) + "_c" + std::to_string(p.cluster);
  const char* kind = p.staged ? "_staged" : p.impl == RmsNormImpl::kCluster ? "_cluster" : p.cache ? "_reg" : "_stream";
  return std::string(p.add_residual ? "fused_add_rms_norm_fwd__" : "rms_norm_fwd__") + short_type_name(p.dtype) +
         "__n" + std::to_string(p.n) + "__v" + std::to_string(p.vec) + layout + (p.has_weight ? "_w" : "_nw") + kind +
         "__eps" + std::to_string(p.eps_bits) + "__" + arch;
}

jit::KernelSource rms_norm_source(const RmsNormPlan& p, const std::string& arch) {
  const std::string kernel = std::string(p.add_residual ? "tileops::fused_add_rms_norm_fwd" : "tileops::rms_norm_fwd");
  const std::string head = std::string("<") + kernel_type_name(p.dtype) + ", " + std::to_string(p.n) + ", " +
                           std::to_string(p.vec) + ", " + std::to_string(p.tpr) + ", ";
  const std::string w = p.has_weight ? "true" : "false";
  const std::string eps = std::to_string(p.eps_bits) + "u>";
  if (p.staged)
    return make_source(rms_norm_name(p, arch), "norm/rms_norm_fwd_staged.cuh",
                       kernel + "_staged" + head + std::to_string(p.cluster) + ", " + w + ", " + eps, arch);
  if (p.impl == RmsNormImpl::kCluster)
    return make_source(rms_norm_name(p, arch), "norm/rms_norm_fwd_cluster.cuh",
                       kernel + "_cluster" + head + std::to_string(p.cluster) + ", " + w + ", " + eps, arch);
  return make_source(rms_norm_name(p, arch), "norm/rms_norm_fwd.cuh",
                     kernel + head + std::to_string(p.rows) + ", " + w + ", " + (p.cache ? "true" : "false") + ", " +
                         eps,
                     arch);
}

KernelBuilder make_rms_norm_builder(RmsNormSlots slots) {
  KernelBuilder b;
  const bool add = slots.residual >= 0;
  // Build identity: (dtype, n, eps, weight or not, access width, implementation) and, only for an
  // implementation whose build reads device facts (cluster, staged: sm_90+), the compute capability.
  b.identity = [slots, add](const OpCall& call) {
    TORCH_CHECK(call.device.is_cuda(), "target 'nvrtc' serves CUDA tensors only, got ", call.device,
                "; use target='reference' (or the default) for this device");
    const at::Tensor& x = call.inputs[slots.x];
    const int64_t n = c10::multiply_integers(call.params[slots.normalized_shape].as_ints());
    const int elem = static_cast<int>(x.element_size());
    const int max_vec = alignment_vec(call, slots, elem);
    const DeviceInfo& dev = device_info(call.device.index());
    const RmsNormProblem q = problem_of(x.scalar_type(), n, max_vec, dev.cc_major, add);
    const auto& impl = select_implementation(call.op_name, rms_norm_implementations(), q);
    return BuildKey{static_cast<int64_t>(x.scalar_type()), n, static_cast<int64_t>(float_bits(eps_of(call, slots))),
                    call.inputs[slots.weight].defined() ? 1 : 0, max_vec, impl.id,
                    impl.device_dependent ? dev.cc_major * 10 + dev.cc_minor : 0};
  };
  b.build = [slots, add](const OpCall& call, const BuildKey& key) -> std::shared_ptr<const Kernel> {
    const int device = call.device.index();
    const DeviceInfo& dev = device_info(device);
    float eps;
    const uint32_t bits = static_cast<uint32_t>(key.words[2]);
    std::memcpy(&eps, &bits, sizeof eps);
    const RmsNormPlan plan = plan_rms_norm(static_cast<c10::ScalarType>(key.words[0]), key.words[1], key.words[3] != 0,
                                           eps, static_cast<int>(key.words[4]), add, dev.cc_major);
    LoadedKernel k = load(rms_norm_source(plan, dev.arch), device);
    if (plan.impl == RmsNormImpl::kCluster) allow_large_clusters(k, plan.cluster);
    StagedWalk walk;
    if (plan.staged && plan.cluster == 1) {
      walk = plan_staged_walk(k, plan.tpr, rms_norm_smem_bytes(plan), dev);
    } else {
      walk.slot_bytes = rms_norm_smem_bytes(plan);
      allow_dynamic_smem(k, walk.slot_bytes, dev);
    }
    return std::make_shared<RmsNormKernel>(std::move(k), plan, slots, walk);
  };
  b.describe = [add](const BuildKey& key) {
    return std::string(add ? "fused_add_rms_norm_fwd(dtype=" : "rms_norm_fwd(dtype=") +
           short_type_name(static_cast<c10::ScalarType>(key.words[0])) + ", n=" + std::to_string(key.words[1]) +
           ", weight=" + (key.words[3] ? "yes" : "no") + ", vec=" + std::to_string(key.words[4]) +
           ", impl=" + rms_norm_impl_name(static_cast<RmsNormImpl>(key.words[5])) + ")";
  };
  return b;
}

KernelBuilder rms_norm_fwd_builder() {
  return make_rms_norm_builder(RmsNormSlots{op::x, -1, op::weight, op::y, -1, op::normalized_shape, op::eps});
}

TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormFwdOp, rms_norm_fwd_builder);

}  // namespace tileops::nvrtc

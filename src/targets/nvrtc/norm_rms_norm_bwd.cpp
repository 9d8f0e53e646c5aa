// RMSNormBwdOp on the nvrtc target, and the planner/builder it shares with LayerNormBwdOp
// (norm_layer_norm_bwd.cpp). Kernels: src/kernels/norm/{rms,layer}_norm_bwd.cuh and
// norm_bwd_common.cuh (design notes there).
//
// A call: dx and the per-CTA partial rows of dweight/dbias from one persistent launch of G CTAs
// (G = norm_bwd_grid: min(SMs x the plan's grid_per_sm, row groups of the call), one CTA an SM for
// short LayerNorm calls; fixed per build, device and row
// count, so the summation order is too), then, when a weight gradient is wanted, norm_bwd_reduce
// sums the G partial rows per column in a fixed order (on sm_90+ a programmatic dependent launch of
// the main kernel, which hides the launch gap between the two). The workspace [G, N] (x2 for dweight and
// dbias) comes from the torch caching allocator on the call's stream.
#include "targets/nvrtc/norm_rms_norm_bwd.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/log.h"
#include "jit/cuda_driver.h"
#include "targets/builtin.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace rop = tileops::ops::norm_rms_norm_bwd;

float eps_of(const OpCall& call, const NormBwdSlots& s) {
  if (s.layer) return static_cast<float>(call.params[s.eps].as_real());
  // F.rms_norm: eps=None is torch.finfo(float32).eps for float16/bfloat16/float32 inputs.
  const auto eps = call.params[s.eps].as_optional_real();
  return eps ? static_cast<float>(*eps) : FLT_EPSILON;
}

SmResources sm_resources(int device) {
  const auto& drv = jit::driver();
  CUdevice dev;
  jit::check_cu(drv.cuDeviceGet(&dev, device), "cuDeviceGet");
  auto attr = [&](CUdevice_attribute a, int fallback) {
    int v = 0;
    return drv.cuDeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS && v > 0 ? v : fallback;
  };
  SmResources sm;
  sm.threads = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, sm.threads);
  sm.blocks = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, sm.blocks);
  sm.smem = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, sm.smem);
  int reserved = 0;
  sm.reserved_smem = drv.cuDeviceGetAttribute(&reserved, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, dev) ==
                             CUDA_SUCCESS
                         ? reserved
                         : sm.reserved_smem;
  return sm;
}

class NormBwdKernel final : public Kernel {
 public:
  NormBwdKernel(LoadedKernel main, std::unique_ptr<LoadedKernel> reduce, NormBwdPlan p, NormBwdSlots s, int max_grid,
                int sm_count, bool dependent_reduce)
      : main_(std::move(main)),
        reduce_(std::move(reduce)),
        p_(p),
        s_(s),
        max_grid_(max_grid),
        sm_count_(sm_count),
        dependent_reduce_(dependent_reduce) {}

  void launch(const OpCall& call) const override {
    const at::Tensor& dy_t = call.inputs[s_.dy];
    const void* dy = dy_t.const_data_ptr();
    const void* x = call.inputs[s_.x].const_data_ptr();
    const void* w = p_.has_weight ? call.inputs[s_.weight].const_data_ptr() : nullptr;
    void* dx = call.outputs[s_.dx].mutable_data_ptr();
    long long rows = dy_t.numel() / p_.n;
    const long long grid = norm_bwd_grid(p_, rows, max_grid_, sm_count_);
    // Per-CTA partial rows: [grid, n] for dweight, then [grid, n] for dbias. M = 0 gives grid = 0:
    // the main kernel is skipped and the reduction writes zeros (the gradient of no rows).
    at::Tensor ws;
    void* part_w = nullptr;
    void* part_b = nullptr;
    if (p_.dw || p_.db) {
      const int64_t per = grid * p_.n;
      ws = at::empty({(int64_t{p_.dw} + int64_t{p_.db}) * per}, dy_t.options().dtype(at::kFloat));
      float* base = ws.mutable_data_ptr<float>();
      if (p_.dw) part_w = base;
      if (p_.db) part_b = base + (p_.dw ? per : 0);
    }
    if (grid > 0) {
      void* args[] = {&dy, &x, &w, &dx, &part_w, &part_b, &rows};
      nvrtc::launch(main_, static_cast<unsigned>(grid), static_cast<unsigned>(p_.threads()),
                    static_cast<unsigned>(p_.smem_bytes), args);
    }
    if (reduce_) {
      void* dweight = p_.dw ? call.outputs[s_.dweight].mutable_data_ptr() : nullptr;
      void* dbias = p_.db ? call.outputs[s_.dbias].mutable_data_ptr() : nullptr;
      int parts = static_cast<int>(grid);
      int n = p_.n;
      void* args[] = {&part_w, &part_b, &dweight, &dbias, &parts, &n};
      // 32 warps a CTA: kReduceWarps in norm_bwd_common.cuh.
      const auto rgrid = static_cast<unsigned>((p_.n + 31) / 32);
      // Dependent only on our own main kernel: with no rows there is none, and the reduction would
      // depend on whatever the stream ran before.
      if (dependent_reduce_ && grid > 0) nvrtc::launch_dependent(*reduce_, rgrid, 1024, 0, args);
      else nvrtc::launch(*reduce_, rgrid, 1024, 0, args);
    }
  }

 private:
  LoadedKernel main_;
  std::unique_ptr<LoadedKernel> reduce_;
  NormBwdPlan p_;
  NormBwdSlots s_;
  int max_grid_;
  int sm_count_;
  bool dependent_reduce_;  // the reduction is a programmatic dependent launch (sm_90+)
};

}  // namespace

NormBwdPlan plan_norm_bwd(c10::ScalarType dtype, int64_t n, bool layer, bool has_weight, bool dw, bool db, float eps,
                          int max_vec, int smem_budget) {
  TORCH_CHECK(n >= 1 && n <= (int64_t{1} << 24), "tileops: norm backward rows of 1..2^24 elements, got ", n);
  NormBwdPlan p{};
  p.dtype = dtype;
  p.layer = layer;
  p.n = static_cast<int>(n);
  p.has_weight = has_weight;
  p.dw = dw;
  p.db = layer && db;
  p.eps_bits = float_bits(eps);
  const int elem = static_cast<int>(c10::elementSize(dtype));
  p.vec = row_access_width(dtype, n, max_vec);
  const int64_t vecs = n / p.vec;
  // Threads per row as in the forward: about kTarget vectors a thread on up to 256 threads, then up
  // to 8 on wider CTAs. TILEOPS_NORM_BWD_VECS_PER_THREAD overrides kTarget (experiments).
  static const int kTarget = env_int("TILEOPS_NORM_BWD_VECS_PER_THREAD", 4, 1, 16);
  p.tpr = std::min<int>(256, next_pow2((vecs + kTarget - 1) / kTarget));
  if ((vecs + p.tpr - 1) / p.tpr > 8) p.tpr = std::min<int>(1024, next_pow2((vecs + 7) / 8));
  const int64_t per = (vecs + p.tpr - 1) / p.tpr;
  const int nacc = int{p.dw} + int{p.db};
  const int64_t owned = per * p.vec;
  int64_t est = 0;
  // Staging, partials and registers for a number of row groups per CTA.
  auto decide = [&] {
    // Staging: cp.async moves 4, 8 or 16 bytes; two stages of the CTA's rows of x and dy, then the weight.
    const int64_t staged = 2LL * p.rows * 2 * n * elem + (has_weight ? n * elem : 0);
    p.smem = p.vec * elem >= 4 && per <= 16 && staged <= smem_budget;
    // Registers a thread needs: the partials (one fp32 per owned element and gradient), plus, when
    // the row is re-read from global memory, x/dy/w that the compiler may keep live between passes,
    // plus addresses, loop state and temporaries: 48 for RMSNorm, 64 for LayerNorm (three passes,
    // more row statistics). Calibrated with ptxas -v on sm_90a/sm_80 (at a cap of 80, LayerNorm rows
    // of 24 bf16 a thread spilled with 56); tests/kernels/test_norm_bwd_nvrtc.cpp fails on spills.
    est = (layer ? 64 : 48) + owned * nacc + (p.smem ? 0 : (owned * (2 + (has_weight ? 1 : 0)) * elem + 3) / 4);
    const int cap = std::min(255, 65536 / p.threads());
    // Unrolled (register) plans only where the estimate fits the cap the launch bounds set.
    p.acc_reg = per <= 16 && est <= cap;
    // Dynamic shared memory: the stages (and weight), or, without staging, the buffer that combines
    // several row groups' partials at the end ([slots][n] floats, see store_partials).
    const int slots = p.tpr < 32 ? p.threads() / 32 : p.rows;
    if (p.smem) {
      p.smem_bytes = static_cast<int>(staged);
    } else if (p.acc_reg && nacc > 0 && p.rows > 1) {
      p.smem_bytes = static_cast<int>(std::min<int64_t>(int64_t{slots} * n * 4, INT32_MAX));
    } else {
      p.smem_bytes = 0;
    }
  };
  // 256-thread CTAs: short rows share a CTA (fewer partial rows to sum than one CTA per row group).
  // TILEOPS_NORM_BWD_CTA_THREADS overrides 256 (experiments).
  static const int kCtaThreads = next_pow2(env_int("TILEOPS_NORM_BWD_CTA_THREADS", 256, 32, 1024));
  p.rows = p.tpr < kCtaThreads ? kCtaThreads / p.tpr : 1;
  decide();
  // Workspace partials are owned by one row group per CTA; a combine buffer must fit shared memory.
  if (p.rows > 1 && (!p.acc_reg || p.smem_bytes > smem_budget)) {
    p.rows = 1;
    decide();
  }
  const int64_t regs = (std::min<int64_t>(est, 255) + 7) / 8 * 8;

  // CTAs per SM the compiler must make room for (register cap 64K / (threads * min_blocks)); bounded
  // by 2048 threads and a nominal 228 KB of shared memory per SM (the grid uses the device's own
  // limits, see norm_bwd_blocks_per_sm).
  int blocks = static_cast<int>(65536 / (p.threads() * regs));
  blocks = std::min(blocks, 2048 / p.threads());
  if (p.smem_bytes > 0) blocks = std::min(blocks, (228 * 1024) / (p.smem_bytes + 2048));
  p.min_blocks = std::clamp(blocks, 1, 32);
  // Staged RMSNorm rows of 8 KB and more, with dweight: one CTA an SM. Measured on the H200 (bf16,
  // docs/PERF.md, session 6): 16384x4096 117 -> 103 us, 2048x4096 20.5 -> 18.0 us, 2048x8192
  // 35.4 -> 32.5 us against 2-3 CTAs an SM; 4096x16384 already has one. Shorter rows (several a CTA)
  // and dx alone were not measured and keep min_blocks; so does LayerNorm (one CTA an SM: 114 -> 141 us).
  p.grid_per_sm = !layer && p.smem && p.dw && n * elem >= 8192 ? 1 : p.min_blocks;
  return p;
}

int norm_bwd_smem_budget(int max_smem_optin) {
  return std::min(kNormBwdSmemBudget, max_smem_optin - kNormBwdStaticSmem);
}

namespace {
// TILEOPS_NORM_BWD_BLOCKS_PER_SM (experiments; 0 when unset): replaces grid_per_sm, up to min_blocks,
// and turns off the short-call rule of norm_bwd_grid. Read once.
int blocks_per_sm_knob() {
  static const int kKnob = env_int("TILEOPS_NORM_BWD_BLOCKS_PER_SM", 0, 1, 32);
  return kKnob;
}
}  // namespace

int norm_bwd_blocks_per_sm(const NormBwdPlan& p, const SmResources& sm) {
  const int kOverride = blocks_per_sm_knob();
  int b = kOverride > 0 ? std::min(kOverride, p.min_blocks) : p.grid_per_sm;
  b = std::min(b, sm.threads / p.threads());
  b = std::min(b, sm.blocks);
  // Beside the stages, each CTA's static reduction scratch (at most kNormBwdStaticSmem).
  b = std::min(b, sm.smem / (p.smem_bytes + kNormBwdStaticSmem + sm.reserved_smem));
  return std::max(1, b);
}

int norm_bwd_max_grid(const NormBwdPlan& p, int sm_count, const SmResources& sm) {
  int64_t g = int64_t{std::max(1, sm_count)} * norm_bwd_blocks_per_sm(p, sm);
  const int nacc = int{p.dw} + int{p.db};
  if (nacc > 0) g = std::min<int64_t>(g, std::max<int64_t>(1, kNormBwdWorkspaceBudget / (int64_t{p.n} * 4 * nacc)));
  return static_cast<int>(g);
}

int64_t norm_bwd_grid(const NormBwdPlan& p, int64_t rows, int max_grid, int sm_count) {
  const int64_t groups = (rows + p.rows - 1) / p.rows;
  int64_t grid = std::min<int64_t>(max_grid, groups);
  // LayerNorm calls of few row groups a CTA (<= kFewWalks on the full grid) run one CTA an SM: half
  // the partial rows of dweight and dbias to reduce, which costs more than a second CTA an SM gains
  // over so short a walk. H200, bf16 (docs/PERF.md, session 7, run 3): 2048x4096 23.4 -> 21.9 us,
  // 2048x8192 43.9 -> 41.8; 16384x4096 (31 groups a CTA) got slower at one an SM (run 2: 110.7 ->
  // 118.5) and 4096x16384 (15.5) no faster, so they keep the full grid. Not under TILEOPS_NORM_BWD_BLOCKS_PER_SM (experiments).
  constexpr int64_t kFewWalks = 8;
  if (p.layer && (p.dw || p.db) && blocks_per_sm_knob() == 0 && groups <= kFewWalks * max_grid)
    grid = std::min<int64_t>(grid, std::max(1, sm_count));
  return grid;
}

std::string norm_bwd_name(const NormBwdPlan& p, const std::string& arch) {
  return std::string(p.layer ? "layer_norm_bwd__" : "rms_norm_bwd__") + short_type_name(p.dtype) + "__n" +
         std::to_string(p.n) + "__v" + std::to_string(p.vec) + "_t" + std::to_string(p.tpr) + "_r" +
         std::to_string(p.rows) + "_b" + std::to_string(p.min_blocks) + (p.has_weight ? "_w" : "_nw") +
         (p.dw ? "_dw" : "") + (p.db ? "_db" : "") + (p.smem ? "_smem" : "_gmem") + (p.acc_reg ? "_reg" : "_ws") +
         "__eps" + std::to_string(p.eps_bits) + "__" + arch;
}

jit::KernelSource norm_bwd_source(const NormBwdPlan& p, const std::string& arch) {
  auto b = [](bool v) { return v ? "true" : "false"; };
  std::string expr = std::string(p.layer ? "tileops::layer_norm_bwd<" : "tileops::rms_norm_bwd<") +
                     kernel_type_name(p.dtype) + ", " + std::to_string(p.n) + ", " + std::to_string(p.vec) + ", " +
                     std::to_string(p.tpr) + ", " + std::to_string(p.rows) + ", " + std::to_string(p.min_blocks) +
                     ", " + b(p.has_weight) + ", " + b(p.dw) + ", ";
  if (p.layer) expr += std::string(b(p.db)) + ", ";
  expr += std::string(b(p.smem)) + ", " + b(p.acc_reg) + ", " + std::to_string(p.eps_bits) + "u>";
  return make_source(norm_bwd_name(p, arch), p.layer ? "norm/layer_norm_bwd.cuh" : "norm/rms_norm_bwd.cuh", expr,
                     arch);
}

jit::KernelSource norm_bwd_reduce_source(c10::ScalarType dtype, bool dw, bool db, const std::string& arch) {
  const std::string expr = std::string("tileops::norm_bwd_reduce<") + kernel_type_name(dtype) + ", " +
                           (dw ? "true" : "false") + ", " + (db ? "true" : "false") + ">";
  const std::string name = std::string("norm_bwd_reduce__") + short_type_name(dtype) + (dw ? "_dw" : "") +
                           (db ? "_db" : "") + "__" + arch;
  return make_source(name, "norm/norm_bwd_common.cuh", expr, arch);
}

KernelBuilder make_norm_bwd_builder(NormBwdSlots slots) {
  KernelBuilder b;
  // Build identity: (dtype, n, eps, weight or not, which gradients, access width). The device enters
  // through the build (arch, shared memory budget, grid): the runtime keys kernels by device.
  b.identity = [slots](const OpCall& call) {
    TORCH_CHECK(call.device.is_cuda(), "target 'nvrtc' serves CUDA tensors only, got ", call.device,
                "; use target='reference' (or the default) for this device");
    const at::Tensor& dy = call.inputs[slots.dy];
    const at::Tensor& w = call.inputs[slots.weight];
    const int64_t n = c10::multiply_integers(call.params[slots.normalized_shape].as_ints());
    const int elem = static_cast<int>(dy.element_size());
    const int64_t grads = (call.outputs[slots.dweight].defined() ? 1 : 0) |
                          (slots.dbias >= 0 && call.outputs[slots.dbias].defined() ? 2 : 0);
    const int vec = access_width({dy.data_ptr(), call.inputs[slots.x].data_ptr(), call.outputs[slots.dx].data_ptr(),
                                  w.defined() ? w.data_ptr() : nullptr},
                                 elem);
    return BuildKey{static_cast<int64_t>(dy.scalar_type()), n, static_cast<int64_t>(float_bits(eps_of(call, slots))),
                    w.defined() ? 1 : 0, grads, vec};
  };
  b.build = [slots](const OpCall& call, const BuildKey& key) -> std::shared_ptr<const Kernel> {
    const int device = call.device.index();
    const DeviceInfo& dev = device_info(device);
    float eps;
    const uint32_t bits = static_cast<uint32_t>(key.words[2]);
    std::memcpy(&eps, &bits, sizeof eps);
    const auto dtype = static_cast<c10::ScalarType>(key.words[0]);
    const bool dw = (key.words[4] & 1) != 0, db = (key.words[4] & 2) != 0;
    const int budget = norm_bwd_smem_budget(dev.max_smem_optin);
    const NormBwdPlan plan = plan_norm_bwd(dtype, key.words[1], slots.layer, key.words[3] != 0, dw, db, eps,
                                           static_cast<int>(key.words[5]), budget);
    LoadedKernel main = load(norm_bwd_source(plan, dev.arch), device);
    allow_dynamic_smem(main, plan.smem_bytes, dev);
    std::unique_ptr<LoadedKernel> reduce;
    if (plan.dw || plan.db)
      reduce = std::make_unique<LoadedKernel>(load(norm_bwd_reduce_source(dtype, plan.dw, plan.db, dev.arch), device));
    const int max_grid = norm_bwd_max_grid(plan, dev.sm_count, sm_resources(device));
    // sm_90+: the reduction is launched as a programmatic dependent of the main kernel, which hides
    // the launch gap between them. TILEOPS_NORM_BWD_PDL=0 launches the reduction plainly (experiments;
    // the main kernels still allow an early launch, which only a dependent launch uses).
    static const bool kDependentReduce = env_int("TILEOPS_NORM_BWD_PDL", 1, 0, 1) == 1;
    const bool dependent = kDependentReduce && dependent_launch_supported(dev);
    if (reduce)
      log::debug("tileops: " + reduce->name + (dependent ? " is a programmatic dependent launch" : " is a plain launch"));
    return std::make_shared<NormBwdKernel>(std::move(main), std::move(reduce), plan, slots, max_grid, dev.sm_count,
                                           dependent);
  };
  b.describe = [slots](const BuildKey& key) {
    const std::string grads = std::string((key.words[4] & 1) ? "dweight" : "") +
                              ((key.words[4] & 3) == 3 ? "+" : "") + ((key.words[4] & 2) ? "dbias" : "");
    return std::string(slots.layer ? "layer_norm_bwd(dtype=" : "rms_norm_bwd(dtype=") +
           short_type_name(static_cast<c10::ScalarType>(key.words[0])) + ", n=" + std::to_string(key.words[1]) +
           ", weight=" + (key.words[3] ? "yes" : "no") + ", grads=dx" + (grads.empty() ? "" : "+" + grads) +
           ", vec=" + std::to_string(key.words[5]) + ")";
  };
  return b;
}

namespace {

KernelBuilder rms_norm_bwd_builder() {
  return make_norm_bwd_builder(NormBwdSlots{false, rop::dy, rop::x, rop::weight, rop::dx, rop::dweight, -1,
                                            rop::normalized_shape, rop::eps});
}

TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormBwdOp, rms_norm_bwd_builder);

}  // namespace
}  // namespace tileops::nvrtc

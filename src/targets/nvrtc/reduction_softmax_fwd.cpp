// SoftmaxFwdOp (and, through log_softmax_fwd_builder, LogSoftmaxFwdOp: same kernels with LOG=true)
// on the nvrtc target.
//
// The kernels reduce the last dim of a contiguous tensor. Another `dim` is moved last first
// (x.movedim(dim, -1).contiguous()), computed, and copied back into y's layout: a known cost of two
// extra copies of the tensor (read+write each) and two temporaries, on top of the kernel.
#include "targets/nvrtc/reduction_softmax_fwd.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/norm_rms_norm_fwd.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::reduction_softmax_fwd;
namespace lop = tileops::ops::reduction_log_softmax_fwd;
static_assert(op::x == lop::x && op::y == lop::y && op::dim == lop::dim, "softmax and log_softmax share one launcher");




// The reduced dim, wrapped as torch does (a 0-dim x is a 1-element row).
int64_t wrapped_dim(const OpCall& call) {
  const int64_t nd = call.inputs[op::x].dim();
  const int64_t d = call.params[op::dim].as_int();
  return nd == 0 ? 0 : (d < 0 ? d + nd : d);
}

bool dim_is_last(const OpCall& call) {
  const int64_t nd = call.inputs[op::x].dim();
  return nd == 0 || wrapped_dim(call) == nd - 1;
}

int64_t row_length(const OpCall& call) {
  const at::Tensor& x = call.inputs[op::x];
  return x.dim() == 0 ? 1 : x.size(wrapped_dim(call));
}

// Widest access x and y allow. A moved dim computes on fresh (allocator-aligned) temporaries.
int alignment_vec(const OpCall& call, int elem) {
  if (!dim_is_last(call)) return 16 / elem;
  const uintptr_t bits = reinterpret_cast<uintptr_t>(call.inputs[op::x].data_ptr()) |
                         reinterpret_cast<uintptr_t>(call.outputs[op::y].data_ptr());
  int bytes = 16;
  while (bytes > elem && (bits % bytes) != 0) bytes /= 2;
  return bytes / elem;
}

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(std::vector<LoadedKernel> k, SoftmaxPlan p, StagedWalk walk)
      : k_(std::move(k)), p_(p), walk_(walk) {}

  void launch(const OpCall& call) const override {
    const at::Tensor& x = call.inputs[op::x];
    const at::Tensor& y = call.outputs[op::y];
    if (dim_is_last(call)) return run(call, x, y);
    // Known cost (see the file comment): move the dim last, compute, copy back into y's layout.
    const int64_t d = wrapped_dim(call);
    const at::Tensor xt = x.movedim(d, -1).contiguous();
    const at::Tensor yt = at::empty_like(xt, at::MemoryFormat::Contiguous);
    run(call, xt, yt);
    y.copy_(yt.movedim(-1, d));
  }

 private:
  void run(const OpCall& call, const at::Tensor& x, const at::Tensor& y) const {
    const void* xp = x.const_data_ptr();
    void* yp = y.mutable_data_ptr();
    long long rows = x.numel() / p_.n;
    if (p_.impl == SoftmaxImpl::kSplit) {
      const long long grid = rows * p_.splits;
      TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many rows (", rows, ") for one launch");
      // Per-row partial (max, sum) pairs: a small temporary from the torch allocator.
      const at::Tensor ws = at::empty({grid * 2}, x.options().dtype(at::kFloat));
      void* wp = ws.mutable_data_ptr();
      void* stats_args[] = {&xp, &wp};
      nvrtc::launch(k_[0], static_cast<unsigned>(grid), static_cast<unsigned>(p_.tpb), 0, stats_args);
      void* apply_args[] = {&xp, &wp, &yp};
      nvrtc::launch(k_[1], static_cast<unsigned>(grid), static_cast<unsigned>(p_.tpb), 0, apply_args);
      return;
    }
    if (p_.impl == SoftmaxImpl::kCluster) {
      const long long grid = rows * p_.cluster;
      TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many rows (", rows, ") for one launch");
      void* args[] = {&xp, &yp, &rows};
      nvrtc::launch_cluster(k_[0], static_cast<unsigned>(grid), static_cast<unsigned>(p_.tpb),
                            static_cast<unsigned>(p_.cluster), 0, args);
      return;
    }
    void* args[] = {&xp, &yp, &rows};
    const long long grid = p_.impl == SoftmaxImpl::kStaged ? walk_.grid(rows) : (rows + p_.rows - 1) / p_.rows;
    TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many rows (", rows, ") for one launch");
    nvrtc::launch(k_[0], static_cast<unsigned>(grid), static_cast<unsigned>(p_.tpr * p_.rows),
                  static_cast<unsigned>(walk_.smem_bytes(rows)), args);
  }

  std::vector<LoadedKernel> k_;
  SoftmaxPlan p_;
  StagedWalk walk_;  // kStaged: persistent CTAs
};

KernelBuilder make_builder(bool log) {
  KernelBuilder b;
  // Identity: (dtype, n, access width, split or not). LOG is fixed per op (this builder).
  b.identity = [](const OpCall& call) {
    TORCH_CHECK(call.device.is_cuda(), "target 'nvrtc' serves CUDA tensors only, got ", call.device,
                "; use target='reference' (or the default) for this device");
    const at::Tensor& x = call.inputs[op::x];
    const int64_t n = row_length(call);
    TORCH_CHECK(n <= (int64_t{1} << 30), call.op_name, ": the nvrtc target reduces dims of at most 2^30 elements, got ",
                n);
    const int elem = static_cast<int>(x.element_size());
    const int max_vec = alignment_vec(call, elem);
    const DeviceInfo& dev = device_info(call.device.index());
    const SoftmaxImpl impl = select_softmax(x.scalar_type(), n, max_vec, x.numel() / n, dev.cc_major);
    // The cluster's and the staged row's builds read a device fact (sm_90+): only they carry the
    // compute capability.
    const bool device_dependent = impl == SoftmaxImpl::kCluster || impl == SoftmaxImpl::kStaged;
    return BuildKey{static_cast<int64_t>(x.scalar_type()), n, max_vec, static_cast<int64_t>(impl),
                    device_dependent ? dev.cc_major * 10 + dev.cc_minor : 0};
  };
  b.build = [log](const OpCall& call, const BuildKey& key) -> std::shared_ptr<const Kernel> {
    const int device = call.device.index();
    const DeviceInfo& dev = device_info(device);
    const SoftmaxPlan plan = plan_softmax(static_cast<c10::ScalarType>(key.words[0]), key.words[1], log,
                                          static_cast<int>(key.words[2]), static_cast<SoftmaxImpl>(key.words[3]));
    std::vector<LoadedKernel> kernels;
    for (const auto& src : softmax_sources(plan, dev.arch)) kernels.push_back(load(src, device));
    if (plan.impl == SoftmaxImpl::kCluster) allow_large_clusters(kernels[0], plan.cluster);
    const StagedWalk walk = plan.impl == SoftmaxImpl::kStaged
                                ? plan_staged_walk(kernels[0], plan.tpb, softmax_smem_bytes(plan), dev)
                                : StagedWalk{};
    return std::make_shared<SoftmaxKernel>(std::move(kernels), plan, walk);
  };
  b.describe = [log](const BuildKey& key) {
    return std::string(log ? "log_softmax_fwd" : "softmax_fwd") + "(dtype=" +
           short_type_name(static_cast<c10::ScalarType>(key.words[0])) + ", n=" + std::to_string(key.words[1]) +
           ", vec=" + std::to_string(key.words[2]) + ", impl=" + softmax_impl_name(static_cast<SoftmaxImpl>(key.words[3])) +
           ")";
  };
  return b;
}

}  // namespace

bool softmax_wants_split(int64_t n, int64_t rows) { return n >= 16384 && rows < 128; }

namespace {

// Cluster: plan_row_cluster (nvrtc_target.h) spreads the row over 2..16 CTAs of at most 16 KB each.
bool plan_cluster(SoftmaxPlan& p) {
  RowCluster rc{};
  // 16 KB a CTA, up to 16 CTAs (non-portable, opted into at build): few rows leave SMs idle, so
  // more, smaller CTAs per row; 4x128256 bf16 ran 5.2 µs vs 5.7 at 32 KB / 8 (docs/PERF.md).
  const bool fits =
      plan_row_cluster(p.n / p.vec, p.vec * static_cast<int>(c10::elementSize(p.dtype)), 16384, 16, rc);
  p.cluster = rc.cluster;
  p.tpb = rc.tpb;
  p.tpr = p.rows = 1;
  p.splits = 1;
  p.cache = true;
  return fits;
}

bool row_per_cta_applies(const SoftmaxProblem&) { return true; }
bool split_applies(const SoftmaxProblem& q) { return softmax_wants_split(q.n, q.rows); }
bool cluster_applies(const SoftmaxProblem& q) {
  if (q.cc_major < 9 || !softmax_wants_split(q.n, q.rows)) return false;
  SoftmaxPlan p{};
  p.dtype = q.dtype;
  p.n = static_cast<int>(q.n);
  p.vec = q.vec;
  return plan_cluster(p);
}

// Staged rows: 8 KB and more by default (TILEOPS_STAGED_MIN_ROW_BYTES overrides), never where the
// row is split; 4 vectors a thread. H200 sweep (docs/PERF.md), 4096x4096 bf16: 19.9 us (log_softmax
// 19.3) vs 20.4 (20.4) at 8 a thread and 20.8 (21.7) for the register kernel.
constexpr int kSoftmaxStagedMinRowBytes = 8192;
constexpr int kSoftmaxStagedPerThread = 4;
bool staged_applies(const SoftmaxProblem& q) {
  return !softmax_wants_split(q.n, q.rows) &&
         staged_row_applies(q.dtype, q.n, q.vec, q.cc_major, kSoftmaxStagedMinRowBytes);
}

constexpr uint32_t bit(SoftmaxImpl i) { return 1u << static_cast<int>(i); }

}  // namespace

const std::vector<Implementation<SoftmaxProblem>>& softmax_implementations() {
  static const std::vector<Implementation<SoftmaxProblem>> impls{
      {static_cast<int>(SoftmaxImpl::kRowPerCta), "row-per-cta", row_per_cta_applies, 0u, false},
      {static_cast<int>(SoftmaxImpl::kSplit), "split", split_applies, bit(SoftmaxImpl::kRowPerCta), false},
      {static_cast<int>(SoftmaxImpl::kCluster), "cluster", cluster_applies,
       bit(SoftmaxImpl::kSplit) | bit(SoftmaxImpl::kRowPerCta), true},
      {static_cast<int>(SoftmaxImpl::kStaged), "staged", staged_applies, bit(SoftmaxImpl::kRowPerCta), true},
  };
  return impls;
}

const char* softmax_impl_name(SoftmaxImpl impl) {
  for (const auto& i : softmax_implementations())
    if (i.id == static_cast<int>(impl)) return i.name;
  return "?";
}

SoftmaxImpl select_softmax(c10::ScalarType dtype, int64_t n, int max_vec, int64_t rows, int cc_major) {
  const SoftmaxProblem q{dtype, n, row_access_width(dtype, n, max_vec), rows, cc_major};
  return static_cast<SoftmaxImpl>(select_implementation("tileops::reduction_softmax_fwd", softmax_implementations(), q).id);
}

SoftmaxPlan plan_softmax(c10::ScalarType dtype, int64_t n, bool log, int max_vec, SoftmaxImpl impl) {
  SoftmaxPlan p{};
  p.impl = impl;
  p.dtype = dtype;
  p.n = static_cast<int>(n);
  p.log = log;
  const int elem = static_cast<int>(c10::elementSize(dtype));
  p.vec = row_access_width(dtype, n, max_vec);
  const int64_t vecs = n / p.vec;
  if (impl == SoftmaxImpl::kCluster) {
    plan_cluster(p);
    return p;
  }
  if (impl == SoftmaxImpl::kStaged) {
    p.tpr = p.tpb = staged_row_threads(vecs, kSoftmaxStagedPerThread);
    p.rows = p.splits = p.cluster = 1;
    p.cache = true;
    return p;
  }
  if (impl == SoftmaxImpl::kSplit) {
    // Chunks of about 2048 elements on 256 threads (1-2 vectors a thread): 4 x 128256 bf16 gives
    // 4 * 63 CTAs, enough to fill an H200's 132 SMs; at most 64 partials a row to combine.
    p.tpb = 256;
    p.splits = static_cast<int>(std::clamp<int64_t>((n + 2047) / 2048, 2, 64));
    p.splits = static_cast<int>(std::min<int64_t>(p.splits, vecs));
    p.tpr = p.rows = 1;
    return p;
  }
  p.splits = 1;
  // About 2 vectors a thread on up to 256 threads a row, then up to 8, then wider CTAs; short rows
  // share a CTA (a warp slice each). 2, not RMSNorm's 4: 4096x4096 bf16 ran 20.5 us vs 22.1 at 4 and
  // 26.6 at 8 (H200 sweep, docs/PERF.md; other row lengths not swept).
  // TILEOPS_SOFTMAX_VECS_PER_THREAD replaces the 2, for tuning sweeps (scripts/bench/sweep.py).
  static const int kTarget = [] {
    const char* env = std::getenv("TILEOPS_SOFTMAX_VECS_PER_THREAD");
    const int v = env ? std::atoi(env) : 0;
    return v >= 1 && v <= 8 ? v : 2;
  }();
  p.tpr = std::min<int>(256, next_pow2((vecs + kTarget - 1) / kTarget));
  if ((vecs + p.tpr - 1) / p.tpr > 8) p.tpr = std::min<int>(1024, next_pow2((vecs + 7) / 8));
  const int64_t per_thread = (vecs + p.tpr - 1) / p.tpr;
  const int regs_per_vec = std::max(1, p.vec * elem / 4);
  p.cache = per_thread * regs_per_vec <= 32;  // half of what a 1024-thread CTA may use a thread
  p.rows = p.tpr > 32 ? 1 : 256 / p.tpr;
  return p;
}

int softmax_smem_bytes(const SoftmaxPlan& p) {
  return p.impl == SoftmaxImpl::kStaged ? p.n * static_cast<int>(c10::elementSize(p.dtype)) : 0;
}

std::string softmax_name(const SoftmaxPlan& p, const std::string& arch) {
  std::string s = std::string(p.log ? "log_softmax_fwd__" : "softmax_fwd__") + short_type_name(p.dtype) + "__n" +
                  std::to_string(p.n) + "__v" + std::to_string(p.vec);
  if (p.impl == SoftmaxImpl::kSplit) s += "_split" + std::to_string(p.splits) + "_b" + std::to_string(p.tpb);
  else if (p.impl == SoftmaxImpl::kCluster) s += "_cluster" + std::to_string(p.cluster) + "_b" + std::to_string(p.tpb);
  else if (p.impl == SoftmaxImpl::kStaged) s += "_staged_b" + std::to_string(p.tpb);
  else s += "_t" + std::to_string(p.tpr) + "_r" + std::to_string(p.rows) + (p.cache ? "_reg" : "_stream");
  return s + "__" + arch;
}

std::vector<jit::KernelSource> softmax_sources(const SoftmaxPlan& p, const std::string& arch) {
  const std::string head = std::string("<") + kernel_type_name(p.dtype) + ", " + std::to_string(p.n) + ", " +
                           std::to_string(p.vec) + ", ";
  const std::string log = p.log ? "true" : "false";
  const std::string name = softmax_name(p, arch);
  if (p.impl == SoftmaxImpl::kCluster)
    return {make_source(name, "reduction/softmax_fwd_cluster.cuh",
                        "tileops::softmax_fwd_cluster" + head + std::to_string(p.tpb) + ", " +
                            std::to_string(p.cluster) + ", " + log + ">",
                        arch)};
  if (p.impl == SoftmaxImpl::kStaged)
    return {make_source(name, "reduction/softmax_fwd_staged.cuh",
                        "tileops::softmax_fwd_staged" + head + std::to_string(p.tpb) + ", " + log + ">", arch)};
  if (p.impl == SoftmaxImpl::kSplit) {
    const std::string mid = std::to_string(p.tpb) + ", " + std::to_string(p.splits);
    // The stats kernel does not depend on LOG: both ops share its CUBIN (same name and source).
    std::string stats_name = name;
    if (p.log) stats_name.erase(0, 4);  // "log_softmax..." -> "softmax..."
    return {make_source(stats_name + "__stats", "reduction/softmax_fwd.cuh",
                        "tileops::softmax_split_stats" + head + mid + ">", arch),
            make_source(name + "__apply", "reduction/softmax_fwd.cuh",
                        "tileops::softmax_split_apply" + head + mid + ", " + log + ">", arch)};
  }
  return {make_source(name, "reduction/softmax_fwd.cuh",
                      "tileops::softmax_fwd" + head + std::to_string(p.tpr) + ", " + std::to_string(p.rows) + ", " +
                          (p.cache ? "true" : "false") + ", " + log + ">",
                      arch)};
}

KernelBuilder softmax_fwd_builder() { return make_builder(false); }
KernelBuilder log_softmax_fwd_builder() { return make_builder(true); }

TILEOPS_BUILTIN_KERNEL(nvrtc, SoftmaxFwdOp, softmax_fwd_builder);

}  // namespace tileops::nvrtc

// Softmax / log-softmax: the plan (problem, device, tuning -> spec) and what a spec renders.
#include "targets/nvrtc/reduction/softmax.h"

#include <algorithm>

#include "targets/nvrtc/norm/row_norm.h"  // staged_row_applies, staged_row_threads

namespace tileops::nvrtc {
namespace {

const SoftmaxTable& kT = kSoftmaxTable;
int elem_size(c10::ScalarType t) { return static_cast<int>(c10::elementSize(t)); }
bool wants_split(const SoftmaxProblem& q) { return q.n >= kT.split_min_n && q.few_rows; }

SoftmaxSpec base_spec(const SoftmaxProblem& q, int vec, const DeviceFacts& dev) {
  SoftmaxSpec s{};
  s.dtype = q.dtype;
  s.n = static_cast<int>(q.n);
  s.vec = vec;
  s.log = q.log;
  s.tpr = s.rows = s.splits = s.cluster = 1;
  s.arch = dev.arch;
  return s;
}

// Cluster: the row spread over 2..cluster_max CTAs of at most cluster_cta_bytes each (few rows
// leave SMs idle, so more, smaller CTAs a row; over 8 is opted into at build).
bool plan_cluster(SoftmaxSpec& s, const SoftmaxTable& T) {
  RowCluster rc{};
  const bool fits = plan_row_cluster(s.n / s.vec, s.vec * elem_size(s.dtype), T.cluster_cta_bytes, T.cluster_max,
                                     T.cluster_vpt, rc);
  s.cluster = rc.cluster;
  s.tpb = rc.tpb;
  s.tpr = s.rows = s.splits = 1;
  s.cache = true;
  return fits;
}

bool row_per_cta_applies(const SoftmaxQuery&) { return true; }
bool split_applies(const SoftmaxQuery& r) { return wants_split(r.q); }
bool cluster_applies(const SoftmaxQuery& r) {
  if (r.dev.cc_major < 9 || !wants_split(r.q)) return false;
  SoftmaxSpec s = base_spec(r.q, r.vec, r.dev);
  return plan_cluster(s, r.T);
}
bool staged_applies(const SoftmaxQuery& r) {
  return !wants_split(r.q) && staged_row_applies(r.q.dtype, r.q.n, r.vec, r.dev, r.T.staged_min_row_bytes);
}

constexpr uint32_t bit(SoftmaxImpl i) { return 1u << static_cast<int>(i); }
const char* tf(bool b) { return b ? "true" : "false"; }

}  // namespace

const std::vector<Implementation<SoftmaxQuery>>& softmax_implementations() {
  static const std::vector<Implementation<SoftmaxQuery>> impls{
      {static_cast<int>(SoftmaxImpl::kRowPerCta), "row-per-cta", row_per_cta_applies, 0u},
      {static_cast<int>(SoftmaxImpl::kSplit), "split", split_applies, bit(SoftmaxImpl::kRowPerCta)},
      {static_cast<int>(SoftmaxImpl::kCluster), "cluster", cluster_applies,
       bit(SoftmaxImpl::kSplit) | bit(SoftmaxImpl::kRowPerCta)},
      {static_cast<int>(SoftmaxImpl::kStaged), "staged", staged_applies, bit(SoftmaxImpl::kRowPerCta)},
  };
  return impls;
}

const char* softmax_impl_name(SoftmaxImpl impl) {
  for (const auto& i : softmax_implementations())
    if (i.id == static_cast<int>(impl)) return i.name;
  return "?";
}

SoftmaxTable softmax_table(const Tuning& t) {
  SoftmaxTable T = kSoftmaxTable;
  auto set = [](auto& field, int v) { if (v) field = v; };
  set(T.vecs_per_thread, t.softmax_vecs_per_thread);
  set(T.cluster_cta_bytes, t.cluster_cta_bytes);
  set(T.cluster_max, t.cluster_max);
  set(T.cluster_vpt, t.cluster_vpt);
  set(T.staged_min_row_bytes, t.staged_min_row_bytes);
  set(T.staged_vpt, t.staged_row_vpt);
  set(T.staged_long_vpt, t.staged_row_vpt);
  return T;
}

namespace {

SoftmaxSpec plan_with(SoftmaxImpl impl, const SoftmaxProblem& q, const DeviceFacts& dev, const SoftmaxTable& T) {
  SoftmaxSpec p = base_spec(q, row_access_width(q.dtype, q.n, q.max_vec), dev);
  p.impl = impl;
  const int64_t vecs = q.n / p.vec;
  switch (impl) {
    case SoftmaxImpl::kCluster: plan_cluster(p, T); return p;
    case SoftmaxImpl::kStaged:
      p.tpr = p.tpb = staged_row_threads(
          vecs, q.n * elem_size(q.dtype) >= T.staged_long_row_bytes ? T.staged_long_vpt : T.staged_vpt);
      p.cache = true;
      return p;
    case SoftmaxImpl::kSplit:
      // Chunks of split_chunk elements: a few long rows give enough CTAs to fill the SMs.
      p.tpb = T.split_tpb;
      p.splits = static_cast<int>(std::clamp<int64_t>((q.n + T.split_chunk - 1) / T.split_chunk, 2, T.split_max));
      p.splits = static_cast<int>(std::min<int64_t>(p.splits, vecs));
      return p;
    case SoftmaxImpl::kRowPerCta: break;
  }
  // About vecs_per_thread vectors a thread on up to 256 threads a row, then up to 8, then wider
  // CTAs; short rows share a CTA (a warp slice each).
  const int target = T.vecs_per_thread;
  p.tpr = std::min<int>(256, next_pow2((vecs + target - 1) / target));
  if ((vecs + p.tpr - 1) / p.tpr > 8) p.tpr = std::min<int>(1024, next_pow2((vecs + 7) / 8));
  const int64_t per_thread = (vecs + p.tpr - 1) / p.tpr;
  const int regs_per_vec = std::max(1, p.vec * elem_size(p.dtype) / 4);
  p.cache = per_thread * regs_per_vec <= 32;  // half of what a 1024-thread CTA may use a thread
  p.rows = p.tpr > 32 ? 1 : 256 / p.tpr;
  return p;
}

}  // namespace

SoftmaxSpec plan_softmax(const SoftmaxProblem& q, const DeviceFacts& dev, const Tuning& t) {
  const SoftmaxTable T = softmax_table(t);
  const int vec = row_access_width(q.dtype, q.n, q.max_vec);
  const auto impl = static_cast<SoftmaxImpl>(
      select_implementation(q.log ? "tileops::reduction_log_softmax_fwd" : "tileops::reduction_softmax_fwd",
                            softmax_implementations(), SoftmaxQuery{q, vec, dev, T})
          .id);
  return plan_with(impl, q, dev, T);
}

SoftmaxSpec plan_softmax_as(SoftmaxImpl impl, const SoftmaxProblem& q, const DeviceFacts& dev, const Tuning& t) {
  return plan_with(impl, q, dev, softmax_table(t));
}

int SoftmaxSpec::smem_bytes() const { return impl == SoftmaxImpl::kStaged ? n * elem_size(dtype) : 0; }

std::string SoftmaxSpec::name() const {
  std::string s = std::string(log ? "log_softmax_fwd__" : "softmax_fwd__") + short_type_name(dtype) + "__n" +
                  std::to_string(n) + "__v" + std::to_string(vec);
  if (impl == SoftmaxImpl::kSplit) s += "_split" + std::to_string(splits) + "_b" + std::to_string(tpb);
  else if (impl == SoftmaxImpl::kCluster) s += "_cluster" + std::to_string(cluster) + "_b" + std::to_string(tpb);
  else if (impl == SoftmaxImpl::kStaged) s += "_staged_b" + std::to_string(tpb);
  else s += "_t" + std::to_string(tpr) + "_r" + std::to_string(rows) + (cache ? "_reg" : "_stream");
  return s + "__" + arch;
}

std::vector<jit::KernelSource> SoftmaxSpec::sources() const {
  const std::string head = std::string("<") + kernel_type_name(dtype) + ", " + std::to_string(n) + ", " +
                           std::to_string(vec) + ", ";
  const std::string nm = name();
  switch (impl) {
    case SoftmaxImpl::kCluster:
      return {make_source(nm, "reduction/softmax_fwd_cluster.cuh",
                          "tileops::softmax_fwd_cluster" + head + std::to_string(tpb) + ", " +
                              std::to_string(cluster) + ", " + tf(log) + ">",
                          arch)};
    case SoftmaxImpl::kStaged:
      return {make_source(nm, "reduction/softmax_fwd_staged.cuh",
                          "tileops::softmax_fwd_staged" + head + std::to_string(tpb) + ", " + tf(log) + ">", arch)};
    case SoftmaxImpl::kSplit: {
      const std::string mid = std::to_string(tpb) + ", " + std::to_string(splits);
      // The stats kernel does not depend on LOG: both ops share its CUBIN (same name and source).
      std::string stats_name = nm;
      if (log) stats_name.erase(0, 4);  // "log_softmax..." -> "softmax..."
      return {make_source(stats_name + "__stats", "reduction/softmax_fwd.cuh",
                          "tileops::softmax_split_stats" + head + mid + ">", arch),
              make_source(nm + "__apply", "reduction/softmax_fwd.cuh",
                          "tileops::softmax_split_apply" + head + mid + ", " + tf(log) + ">", arch)};
    }
    case SoftmaxImpl::kRowPerCta: break;
  }
  return {make_source(nm, "reduction/softmax_fwd.cuh",
                      "tileops::softmax_fwd" + head + std::to_string(tpr) + ", " + std::to_string(rows) + ", " +
                          tf(cache) + ", " + tf(log) + ">",
                      arch)};
}

std::string SoftmaxSpec::describe() const {
  return std::string(log ? "log_softmax_fwd" : "softmax_fwd") + "(dtype=" + short_type_name(dtype) +
         ", n=" + std::to_string(n) + ", vec=" + std::to_string(vec) + ", impl=" + softmax_impl_name(impl) + ")";
}

}  // namespace tileops::nvrtc

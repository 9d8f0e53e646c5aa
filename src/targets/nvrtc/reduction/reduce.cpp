// The dim reductions on the nvrtc target: geometry, problem, plan, launch and registration (reduce.h).
#include "targets/nvrtc/reduction/reduce.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "targets/builtin.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Amax: return "amax";
    case ReduceOp::Amin: return "amin";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Var: return "var";
    case ReduceOp::Std: return "std";
    case ReduceOp::VarMean: return "var_mean";
    case ReduceOp::Argmax: return "argmax";
    case ReduceOp::Argmin: return "argmin";
    case ReduceOp::All: return "all";
    case ReduceOp::Any: return "any";
    case ReduceOp::CountNonzero: return "count_nonzero";
    case ReduceOp::L1: return "l1_norm";
    case ReduceOp::L2: return "l2_norm";
    case ReduceOp::Inf: return "inf_norm";
    case ReduceOp::LogSumExp: return "logsumexp";
  }
  return "?";
}

int reduce_state_bytes(ReduceOp op) {
  switch (op) {
    case ReduceOp::Argmax: case ReduceOp::Argmin: return 16;                           // value, index
    case ReduceOp::Var: case ReduceOp::Std: case ReduceOp::VarMean: return 12;         // n, mean, m2
    case ReduceOp::CountNonzero: return 8;                                             // a count
    case ReduceOp::All: case ReduceOp::Any: return 4;                                  // a flag
    case ReduceOp::LogSumExp: return 8;                                                // max, sum
    default: return 4;
  }
}

ReduceGeometry reduce_geometry(c10::IntArrayRef sizes, uint64_t mask) {
  // Runs of one kind (reduced or kept) after dropping size-1 dims: at most kept, reduced, kept.
  struct Run { bool reduced; int64_t size; };
  std::vector<Run> runs;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    const bool r = mask >> d & 1;
    if (!runs.empty() && runs.back().reduced == r) runs.back().size *= sizes[d];
    else runs.push_back({r, sizes[d]});
  }
  ReduceGeometry g;
  size_t k = 0;
  if (k < runs.size() && !runs[k].reduced) g.M = runs[k++].size;
  if (k < runs.size() && runs[k].reduced) g.N = runs[k++].size;
  if (k < runs.size() && !runs[k].reduced) g.I = runs[k++].size;
  if (k < runs.size()) {  // kept and reduced dims interleave: gather the reduced dims last
    g = ReduceGeometry{1, 1, 1, true};
    for (size_t d = 0; d < sizes.size(); ++d) (mask >> d & 1 ? g.N : g.M) *= sizes[d];
  }
  for (int64_t s : sizes) if (s == 0) g.gather = false;  // nothing to gather in an empty x
  return g;
}

namespace {

// The output storage types of an op: (y, y2); y2 is var_mean's mean, else y's type (unused).
std::string out_types(const ReduceSpec& s) { return std::string(kernel_type_name(s.y_dtype)) + ", " + kernel_type_name(s.y_dtype); }

std::string type_part(const ReduceSpec& s) {
  std::string t = short_type_name(s.x_dtype);
  if (s.c_dtype != s.x_dtype) t += std::string("_as_") + short_type_name(s.c_dtype);
  return t + "_" + short_type_name(s.y_dtype);
}

}  // namespace

std::string ReduceSpec::name() const {
  std::string n = std::string("reduce_") + (impl == ReduceImpl::kRows ? "rows" : "cols") + "__" + reduce_op_name(op) +
                  "__" + type_part(*this) + "__v" + std::to_string(vec);
  n += impl == ReduceImpl::kRows ? "_t" + std::to_string(tpr) + "_r" + std::to_string(rows) : "_w" + std::to_string(warps);
  return n + (split ? "__split" : "") + "__" + arch;
}

std::vector<jit::KernelSource> ReduceSpec::sources() const {
  const std::string types = std::string(kernel_type_name(x_dtype)) + ", " + kernel_type_name(c_dtype) + ", " +
                            out_types(*this) + ", " + std::to_string(static_cast<int>(op)) + ", " +
                            std::to_string(vec) + ", ";
  const std::string tail = split ? "true>" : "false>";
  const std::string expr = impl == ReduceImpl::kRows
                               ? "tileops::reduce_rows<" + types + std::to_string(tpr) + ", " + std::to_string(rows) +
                                     ", " + tail
                               : "tileops::reduce_cols<" + types + std::to_string(warps) + ", " + tail;
  std::vector<jit::KernelSource> out{make_source(name(), "reduction/reduce.cuh", expr, arch)};
  if (split) {
    out.push_back(make_source(std::string("reduce_finish__") + reduce_op_name(op) + "__" +
                                  short_type_name(y_dtype) + "__" + arch,
                              "reduction/reduce.cuh",
                              "tileops::reduce_finish<" + out_types(*this) + ", " +
                                  std::to_string(static_cast<int>(op)) + ">",
                              arch));
  }
  return out;
}

std::string ReduceSpec::describe() const {
  return std::string("reduce_") + (impl == ReduceImpl::kRows ? "rows" : "cols") + "(op=" + reduce_op_name(op) +
         ", " + type_part(*this) + ", vec=" + std::to_string(vec) +
         (impl == ReduceImpl::kRows ? ", tpr=" + std::to_string(tpr) + ", rows=" + std::to_string(rows)
                                    : ", warps=" + std::to_string(warps)) +
         (split ? ", split" : "") + ")";
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// CTAs a split aims at for CTAs of `threads`, and the CTAs of an unsplit column plan of `vec`.
int64_t target_ctas(const DeviceFacts& dev, const ReduceTable& T, int threads) {
  return static_cast<int64_t>(dev.sm_count) * T.fill_ctas_per_sm * T.cta_threads / threads;
}
int64_t column_ctas(const ReduceProblem& q, int vec) { return ceil_div(q.I / vec, 32) * q.M; }

int column_vec(const ReduceProblem& q, const ReduceTable& T) {
  const int most = std::min(T.cols_max_vec, T.cols_state_bytes / reduce_state_bytes(q.op));
  int vec = std::max(1, std::min({16 / static_cast<int>(c10::elementSize(q.x_dtype)), q.max_vec, most}));
  while (vec & (vec - 1)) --vec;  // a power of two (the tuning key may say 3)
  while (vec > 1 && q.I % vec != 0) vec /= 2;
  return vec;
}

}  // namespace

ReduceTable reduce_table(const Tuning& t) {
  ReduceTable T = kReduceTable;
  if (t.reduce_cols_warps) T.cols_warps = t.reduce_cols_warps;
  if (t.reduce_ctas_per_sm) T.fill_ctas_per_sm = t.reduce_ctas_per_sm;
  if (t.reduce_split_vecs) T.min_split_vecs = t.reduce_split_vecs;
  if (t.reduce_cols_split_rows) T.cols_split_rows = t.reduce_cols_split_rows;
  if (t.reduce_cols_vec) T.cols_max_vec = t.reduce_cols_vec;
  return T;
}

namespace {

// The single-pass shape of a problem (split decided by reduce_splits).
ReduceSpec shape_of(const ReduceProblem& q, const DeviceFacts& dev, const ReduceTable& T) {
  ReduceSpec s{};
  s.op = q.op;
  s.x_dtype = q.x_dtype;
  s.c_dtype = q.c_dtype;
  s.y_dtype = q.y_dtype;
  s.arch = dev.arch;
  s.tpr = 1;
  s.rows = 1;
  s.warps = 1;
  if (q.I == 1) {
    s.impl = ReduceImpl::kRows;
    s.vec = row_access_width(q.x_dtype, q.N, q.max_vec);
    const int64_t vecs = q.N / s.vec;
    s.tpr = std::max(1, next_pow2(std::min<int64_t>(ceil_div(vecs, T.vecs_per_thread), T.max_tpr)));
    // Few rows split their length across CTAs (reduce_splits): CTAs of cta_threads then, more of them.
    if (s.tpr > T.cta_threads && q.M * 2 < static_cast<int64_t>(dev.sm_count) * T.fill_ctas_per_sm) s.tpr = T.cta_threads;
    s.rows = s.tpr <= 32 ? T.cta_threads / s.tpr : 1;
  } else {
    s.impl = ReduceImpl::kCols;
    s.vec = column_vec(q, T);
    s.warps = T.cols_warps;
    // Narrower lanes (down to cols_min_vec columns) where that alone reaches half the CTA target and
    // the widest does not: a split's second pass costs more than the narrower loads (bool any,
    // 128x1024x512).
    const int64_t want = target_ctas(dev, T, s.threads());
    if (column_ctas(q, s.vec) < want / 2)
      for (int v = s.vec / 2; v >= T.cols_min_vec; v /= 2)
        if (q.I % v == 0 && column_ctas(q, v) >= want / 2) {
          s.vec = v;
          break;
        }
  }
  return s;
}

}  // namespace

int reduce_splits(const ReduceProblem& q, const DeviceFacts& dev, const ReduceTable& T) {
  const ReduceSpec s = shape_of(q, dev, T);
  const int64_t want = target_ctas(dev, T, s.threads());
  int64_t ctas, most;
  if (s.impl == ReduceImpl::kRows) {
    ctas = ceil_div(q.M, s.rows);
    most = q.N / s.vec / (static_cast<int64_t>(s.tpr) * T.min_split_vecs);  // each split keeps its threads busy
  } else {
    ctas = column_ctas(q, s.vec);
    most = q.N / (static_cast<int64_t>(s.warps) * T.cols_split_rows);
  }
  if (ctas >= want / 2 || most < 2) return 1;
  return static_cast<int>(std::clamp<int64_t>(ceil_div(want, ctas), 2, std::min<int64_t>(most, T.max_splits)));
}

ReduceSpec plan_reduce(const ReduceProblem& q, const DeviceFacts& dev, const Tuning& t) {
  const ReduceTable T = reduce_table(t);
  ReduceSpec s = shape_of(q, dev, T);
  s.split = reduce_splits(q, dev, T) > 1;
  s.table = T;
  return s;
}

namespace {

// Where an op keeps its params (generated indices), read once per builder.
struct ReduceParams {
  int dim = -1;         // int, int? or int[]? param
  bool dim_is_int = false;
  bool listed = false;  // an empty dim list reduces none (all/any)
  int correction = -1;
  int dtype = -1;
};

uint64_t mask_of(const OpCall& call, const ReduceParams& p) {
  const int64_t ndim = call.inputs[0].dim();
  const uint64_t all = ndim >= 64 ? ~uint64_t{0} : (uint64_t{1} << ndim) - 1;
  const ParamValue& v = call.params[p.dim];
  if (v.is_none()) return all;
  std::vector<int64_t> dims;
  if (p.dim_is_int) dims.push_back(v.as_int());
  else for (int64_t d : v.as_ints()) dims.push_back(d);
  if (dims.empty()) return p.listed ? 0 : all;
  uint64_t mask = 0;
  for (int64_t d : dims) {  // the generated checks refused out-of-range and repeated dims
    if (ndim == 0) continue;
    mask |= uint64_t{1} << (d < 0 ? d + ndim : d);
  }
  return mask;
}

bool refuses_empty(ReduceOp op) {
  return op == ReduceOp::Amax || op == ReduceOp::Amin || op == ReduceOp::Argmax || op == ReduceOp::Argmin ||
         op == ReduceOp::Inf;
}

// x as the kernels read it: contiguous, reduced dims last when they interleave with kept ones.
at::Tensor gathered(const at::Tensor& x, uint64_t mask) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.dim(); ++d) if (!(mask >> d & 1)) perm.push_back(d);
  for (int64_t d = 0; d < x.dim(); ++d) if (mask >> d & 1) perm.push_back(d);
  return x.permute(perm).contiguous();
}

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(std::vector<LoadedKernel> k, ReduceSpec s, ReduceParams p, DeviceFacts dev)
      : k_(std::move(k)), s_(std::move(s)), p_(p), dev_(std::move(dev)) {}

  void launch(const OpCall& call) const override {
    const uint64_t mask = mask_of(call, p_);
    const ReduceGeometry g = reduce_geometry(call.inputs[0].sizes(), mask);
    const at::Tensor x = g.gather ? gathered(call.inputs[0], mask) : call.inputs[0];
    const at::Tensor& y = call.outputs[0];
    const void* xp = x.const_data_ptr();
    void* yp = y.mutable_data_ptr();
    void* y2p = call.outputs.size() > 1 ? call.outputs[1].mutable_data_ptr() : yp;
    long long M = g.M, N = g.N, I = g.I;
    const float corr = p_.correction >= 0 ? static_cast<float>(call.params[p_.correction].as_int()) : 0.f;
    const ReduceProblem q{s_.op, s_.x_dtype, s_.c_dtype, s_.y_dtype, g.M, g.N, g.I, s_.vec};
    int splits = s_.split ? reduce_splits(q, dev_, s_.table) : 1;
    at::Tensor ws;
    void* wsp = nullptr;
    if (s_.split) {
      ws = at::empty({M * I * splits * reduce_state_bytes(s_.op)}, x.options().dtype(at::kByte));
      wsp = ws.mutable_data_ptr();
    }
    if (s_.impl == ReduceImpl::kRows) {
      void* args[] = {&xp, &yp, &y2p, &wsp, &M, &N, &splits, const_cast<float*>(&corr)};
      nvrtc::launch(k_[0], static_cast<unsigned>((M + s_.rows - 1) / s_.rows * splits), s_.threads(), 0, args);
    } else {
      long long mblocks = std::min<long long>(M, 65535);
      const long long xblocks = (I / s_.vec + 31) / 32;
      void* args[] = {&xp, &yp, &y2p, &wsp, &M, &N, &I, &mblocks, &splits, const_cast<float*>(&corr)};
      nvrtc::launch(k_[0], static_cast<unsigned>(xblocks * mblocks * splits), s_.threads(), 0, args);
    }
    if (s_.split) {
      long long outputs = M * I;
      const void* wsc = wsp;
      void* args[] = {&wsc, &yp, &y2p, &outputs, &N, &splits, const_cast<float*>(&corr)};
      nvrtc::launch(k_[1], static_cast<unsigned>((outputs + 7) / 8), 256, 0, args);
    }
  }

 private:
  std::vector<LoadedKernel> k_;
  ReduceSpec s_;
  ReduceParams p_;
  DeviceFacts dev_;
};

struct ReduceFamily {
  using Problem = ReduceProblem;
  using Spec = ReduceSpec;
  ReduceOp op;
  ReduceParams params;

  Problem problem(const OpCall& call) const {
    const at::Tensor& x = call.inputs[0];
    const uint64_t mask = mask_of(call, params);
    const ReduceGeometry g = reduce_geometry(x.sizes(), mask);
    TORCH_CHECK_INDEX(!(refuses_empty(op) && g.N == 0), reduce_op_name(op),
                      " of an empty reduction has no identity; reduce over non-empty dims");
    const c10::ScalarType y_dtype = call.outputs[0].scalar_type();
    c10::ScalarType c_dtype = x.scalar_type();
    if (params.dtype >= 0 && !call.params[params.dtype].is_none()) c_dtype = call.params[params.dtype].as_dtype();
    // A gathered x is a fresh allocation (aligned); otherwise the call's pointer decides.
    const int max_vec = g.gather ? 16 / static_cast<int>(x.element_size())
                                 : access_width({x.const_data_ptr()}, static_cast<int>(x.element_size()));
    return Problem{op, x.scalar_type(), c_dtype, y_dtype, g.M, g.N, g.I, max_vec};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const { return plan_reduce(q, dev, t); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    return std::make_shared<ReduceKernel>(std::move(k), s, params, static_cast<const DeviceFacts&>(dev));
  }
};

// Each op's builder with its generated param indices (tileops_generated/ops.h).
#define TILEOPS_REDUCE_NVRTC(Class, stem, op_id, extra)                 \
  KernelBuilder stem##_builder() {                                      \
    namespace ns = tileops::ops::reduction_##stem##_fwd;                \
    ReduceParams p;                                                     \
    p.dim = ns::dim;                                                    \
    extra;                                                              \
    return spec_builder(ReduceFamily{ReduceOp::op_id, p});              \
  }                                                                     \
  TILEOPS_BUILTIN_KERNEL(nvrtc, Class, stem##_builder);

TILEOPS_REDUCE_NVRTC(SumFwdOp, sum, Sum, p.dtype = ns::dtype)
TILEOPS_REDUCE_NVRTC(MeanFwdOp, mean, Mean, p.dtype = ns::dtype)
TILEOPS_REDUCE_NVRTC(AmaxFwdOp, amax, Amax, )
TILEOPS_REDUCE_NVRTC(AminFwdOp, amin, Amin, )
TILEOPS_REDUCE_NVRTC(ProdFwdOp, prod, Prod, p.dtype = ns::dtype; p.dim_is_int = true)
TILEOPS_REDUCE_NVRTC(VarFwdOp, var, Var, p.correction = ns::correction)
TILEOPS_REDUCE_NVRTC(StdFwdOp, std, Std, p.correction = ns::correction)
TILEOPS_REDUCE_NVRTC(VarMeanFwdOp, var_mean, VarMean, p.correction = ns::correction)
TILEOPS_REDUCE_NVRTC(ArgmaxFwdOp, argmax, Argmax, p.dim_is_int = true)
TILEOPS_REDUCE_NVRTC(ArgminFwdOp, argmin, Argmin, p.dim_is_int = true)
TILEOPS_REDUCE_NVRTC(AllFwdOp, all, All, p.listed = true)
TILEOPS_REDUCE_NVRTC(AnyFwdOp, any, Any, p.listed = true)
TILEOPS_REDUCE_NVRTC(CountNonzeroFwdOp, count_nonzero, CountNonzero, )
TILEOPS_REDUCE_NVRTC(L1NormFwdOp, l1_norm, L1, )
TILEOPS_REDUCE_NVRTC(L2NormFwdOp, l2_norm, L2, )
TILEOPS_REDUCE_NVRTC(InfNormFwdOp, inf_norm, Inf, )
TILEOPS_REDUCE_NVRTC(LogSumExpFwdOp, log_sum_exp, LogSumExp, )

}  // namespace
}  // namespace tileops::nvrtc

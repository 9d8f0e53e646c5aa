// Row norm forward: the plan (problem, device, tuning -> spec) and what a spec renders.
#include "targets/nvrtc/norm/row_norm.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace tileops::nvrtc {
namespace {


int elem_size(c10::ScalarType t) { return static_cast<int>(c10::elementSize(t)); }
int64_t row_bytes(const RowNormProblem& q) { return q.n * elem_size(q.dtype); }
bool fused(RowNormOp op) { return op == RowNormOp::kFusedAddRmsNorm; }

// Register rows and streaming rows share one thread layout: about vecs_per_thread vectors a thread
// on up to 256 threads a row, then up to 8 (registers still hold the row), then wider CTAs; groups
// wider than a warp reduce through shared memory and own their CTA. A call of few RMSNorm rows in
// registers spreads each row wider (up to 1024 threads): fewer loads a thread, and the kernel then
// loads the weight with x rather than after the reduction.
void plan_row_per_cta(RowNormSpec& s, const RowNormProblem& q, bool cache, const RowNormTable& T) {
  const bool few = cache && q.few_rows && q.op != RowNormOp::kLayerNorm && q.quant == RowNormQuant::kNone;
  const int target = few ? T.few_rows_vecs_per_thread : T.vecs_per_thread;
  const int64_t vecs = s.n / s.vec;
  s.tpr = std::min<int>(few ? 1024 : 256, next_pow2((vecs + target - 1) / target));
  // A row the power-of-two threads split unevenly (3584 bf16: 448 vectors, 3.5 a thread) takes
  // half the threads when they split it evenly, at most 8 vectors a thread; not a lone row with a
  // float32 weight, which ran slower so (docs/PERF.md, "RMSNorm forward").
  const bool halve = !few && !(q.float_weight && !fused(q.op)) && s.tpr > 32;
  if (halve && vecs % s.tpr != 0 && vecs % (s.tpr / 2) == 0 && vecs / (s.tpr / 2) <= 8) s.tpr /= 2;
  if ((vecs + s.tpr - 1) / s.tpr > 8) s.tpr = std::min<int>(1024, next_pow2((vecs + 7) / 8));
  s.rows = s.tpr > 32 ? 1 : 256 / s.tpr;
  s.cache = cache;
}

// Cluster: the row spread over 2..cluster_max CTAs of at most cluster_cta_bytes each; with 16-byte
// accesses each CTA's chunk (and the residual's) is staged in shared memory. False when the chunk
// does not fit a CTA's registers.
bool plan_cluster(RowNormSpec& s, const RowNormTable& T) {
  RowCluster rc{};
  const int64_t vecs = s.n / s.vec;
  const bool fits = plan_row_cluster(vecs, s.vec * elem_size(s.dtype), T.cluster_cta_bytes, T.cluster_max,
                                     T.cluster_vpt, rc);
  s.cluster = rc.cluster;
  s.tpr = rc.tpb;
  s.rows = 1;
  s.cache = true;
  const int64_t chunk = (vecs + s.cluster - 1) / s.cluster;
  s.staged = s.vec * elem_size(s.dtype) == 16 && chunk * 16 * (fused(s.op) ? 2 : 1) <= T.cluster_staged_max_smem;
  if (s.staged) {
    const int vpt = T.cluster_staged_vpt;
    s.tpr = std::clamp(next_pow2((chunk + vpt - 1) / vpt), 32, 1024);
  }
  return fits;
}

RowNormSpec base_spec(const RowNormProblem& q, int vec, const DeviceFacts& dev) {
  RowNormSpec s{};
  s.op = q.op;
  s.dtype = q.dtype;
  s.n = static_cast<int>(q.n);
  s.vec = vec;
  s.cluster = 1;
  s.rows = 1;
  s.weight = q.weight;
  s.bias = q.bias;
  s.float_weight = q.float_weight;
  s.gemma = q.gemma;
  s.quant = q.quant;
  s.qdtype = q.quant == RowNormQuant::kNone ? c10::ScalarType::Char : q.qdtype;
  s.arch = dev.arch;
  return s;
}

// The cluster and staged kernels read a weight of the row's dtype and scale by it as it is.
bool plain_weight(const RowNormProblem& q) { return !q.float_weight && !q.gemma && q.quant == RowNormQuant::kNone; }

bool register_resident_applies(const RowNormQuery& r) { return row_bytes(r.q) <= r.T.register_max_row_bytes; }
bool cluster_applies(const RowNormQuery& r) {
  if (r.q.op == RowNormOp::kLayerNorm || r.dev.cc_major < 9 || !plain_weight(r.q)) return false;
  RowNormSpec s = base_spec(r.q, r.vec, r.dev);
  return plan_cluster(s, r.T);
}
bool streaming_applies(const RowNormQuery& r) { return r.q.quant == RowNormQuant::kNone; }
bool staged_applies(const RowNormQuery& r) {
  if (!plain_weight(r.q)) return false;
  switch (r.q.op) {
    case RowNormOp::kFusedAddRmsNorm:
      return staged_row_applies(r.q.dtype, r.q.n, r.vec, r.dev, r.T.fused_staged_min_row_bytes);
    case RowNormOp::kRmsNorm:
      return staged_row_applies(r.q.dtype, r.q.n, r.vec, r.dev, r.T.rms_staged_min_row_bytes) &&
             row_bytes(r.q) <= r.T.rms_staged_max_row_bytes;
    case RowNormOp::kLayerNorm:
      return staged_row_applies(r.q.dtype, r.q.n, r.vec, r.dev, r.T.ln_staged_min_row_bytes);
  }
  return false;
}

constexpr uint32_t bit(RowNormImpl i) { return 1u << static_cast<int>(i); }

const char* op_stem(RowNormOp op, RowNormQuant quant = RowNormQuant::kNone) {
  if (quant != RowNormQuant::kNone) return op == RowNormOp::kFusedAddRmsNorm ? "fused_add_rms_norm_quant_fwd" : "rms_norm_quant_fwd";
  switch (op) {
    case RowNormOp::kRmsNorm: return "rms_norm_fwd";
    case RowNormOp::kFusedAddRmsNorm: return "fused_add_rms_norm_fwd";
    case RowNormOp::kLayerNorm: return "layer_norm_fwd";
  }
  return "?";
}

const char* op_name(RowNormOp op, RowNormQuant quant = RowNormQuant::kNone) {
  const bool fused = op == RowNormOp::kFusedAddRmsNorm;
  if (quant == RowNormQuant::kStatic)
    return fused ? "tileops::norm_fused_add_rms_norm_static_quant_fwd" : "tileops::norm_rms_norm_static_quant_fwd";
  if (quant == RowNormQuant::kDynamic)
    return fused ? "tileops::norm_fused_add_rms_norm_dynamic_quant_fwd" : "tileops::norm_rms_norm_dynamic_quant_fwd";
  switch (op) {
    case RowNormOp::kRmsNorm: return "tileops::norm_rms_norm_fwd";
    case RowNormOp::kFusedAddRmsNorm: return "tileops::norm_fused_add_rms_norm_fwd";
    case RowNormOp::kLayerNorm: return "tileops::norm_layer_norm_fwd";
  }
  return "?";
}

const char* tf(bool b) { return b ? "true" : "false"; }

}  // namespace

const std::vector<Implementation<RowNormQuery>>& row_norm_implementations() {
  static const std::vector<Implementation<RowNormQuery>> impls{
      {static_cast<int>(RowNormImpl::kRegisterResident), "register-resident", register_resident_applies,
       bit(RowNormImpl::kCluster) | bit(RowNormImpl::kStreaming)},
      {static_cast<int>(RowNormImpl::kCluster), "cluster", cluster_applies, bit(RowNormImpl::kStreaming)},
      {static_cast<int>(RowNormImpl::kStreaming), "streaming", streaming_applies, 0u},
      {static_cast<int>(RowNormImpl::kStaged), "staged", staged_applies,
       bit(RowNormImpl::kRegisterResident) | bit(RowNormImpl::kCluster) | bit(RowNormImpl::kStreaming)},
  };
  return impls;
}

const char* row_norm_impl_name(RowNormImpl impl) {
  for (const auto& i : row_norm_implementations())
    if (i.id == static_cast<int>(impl)) return i.name;
  return "?";
}

bool staged_row_applies(c10::ScalarType dtype, int64_t n, int vec, const DeviceFacts& dev, int min_row_bytes) {
  const int64_t bytes = n * elem_size(dtype);
  return dev.cc_major >= 9 && vec * elem_size(dtype) == 16 && bytes >= min_row_bytes && bytes <= 65536;
}

int staged_row_threads(int64_t vecs, int per_thread) {
  return std::clamp(next_pow2((vecs + per_thread - 1) / per_thread), 32, 1024);
}

RowNormTable row_norm_table(const Tuning& t) {
  RowNormTable T = kRowNormTable;
  auto set = [](auto& field, int v) { if (v) field = v; };
  set(T.vecs_per_thread, t.rms_vecs_per_thread);
  set(T.few_rows_vecs_per_thread, t.rms_few_rows_vpt);
  set(T.cluster_cta_bytes, t.cluster_cta_bytes);
  set(T.cluster_max, t.cluster_max);
  set(T.cluster_vpt, t.cluster_vpt);
  set(T.cluster_staged_vpt, t.staged_cluster_vpt);
  for (int* f : {&T.rms_staged_min_row_bytes, &T.fused_staged_min_row_bytes, &T.ln_staged_min_row_bytes})
    set(*f, t.staged_min_row_bytes);
  for (int* f : {&T.rms_staged_vpt, &T.fused_staged_vpt, &T.ln_staged_vpt_short, &T.ln_staged_vpt_long})
    set(*f, t.staged_row_vpt);
  return T;
}

RowNormSpec plan_row_norm(const RowNormProblem& q, const DeviceFacts& dev, const Tuning& t) {
  const RowNormTable T = row_norm_table(t);
  TORCH_CHECK(q.op != RowNormOp::kLayerNorm || (!q.gemma && q.quant == RowNormQuant::kNone), op_name(q.op),
              ": the LayerNorm kernels have no Gemma or quantised form");
  TORCH_CHECK(!q.gemma || q.weight, op_name(q.op), ": the Gemma form needs a weight");
  // The quantised rows are written from registers only (the register-resident implementation).
  TORCH_CHECK(q.quant == RowNormQuant::kNone || row_bytes(q) <= T.register_max_row_bytes, op_name(q.op, q.quant),
              ": normalized_shape of ", q.n, " elements (", row_bytes(q), " bytes of x a row) is longer than the ",
              T.register_max_row_bytes, " bytes a row the nvrtc kernel keeps in registers");
  TORCH_CHECK(q.quant == RowNormQuant::kNone || (q.weight && !q.float_weight && !q.gemma), op_name(q.op, q.quant),
              ": the quantised rows take a weight of x's dtype");
  const int vec = row_access_width(q.dtype, q.n, q.max_vec);
  RowNormSpec s = base_spec(q, vec, dev);
  s.impl = static_cast<RowNormImpl>(
      select_implementation(op_name(q.op, q.quant), row_norm_implementations(), RowNormQuery{q, vec, dev, T}).id);
  switch (s.impl) {
    case RowNormImpl::kRegisterResident: plan_row_per_cta(s, q, true, T); break;
    case RowNormImpl::kStreaming: plan_row_per_cta(s, q, false, T); break;
    case RowNormImpl::kCluster: plan_cluster(s, T); break;
    case RowNormImpl::kStaged: {
      int vpt = q.op == RowNormOp::kFusedAddRmsNorm ? T.fused_staged_vpt : T.rms_staged_vpt;
      if (q.op == RowNormOp::kLayerNorm)
        vpt = row_bytes(q) >= 16384 ? T.ln_staged_vpt_long : T.ln_staged_vpt_short;
      s.staged = true;
      s.cache = q.op != RowNormOp::kLayerNorm;  // LayerNorm: weight and bias read in the output pass
      s.tpr = staged_row_threads(s.n / s.vec, vpt);
      // One pass of statistics shifted by the row's first element: bfloat16 rows only, where the
      // cancellation it risks stays within the dtype's tolerance (docs/PERF.md).
      s.one_pass = q.op == RowNormOp::kLayerNorm && q.dtype == c10::kBFloat16 && q.n <= T.ln_one_pass_max_n;
      break;
    }
  }
  return s;
}

int RowNormSpec::smem_bytes() const {
  if (!staged) return 0;
  const int64_t vecs = n / vec;
  return static_cast<int>((vecs + cluster - 1) / cluster * 16 * (op == RowNormOp::kFusedAddRmsNorm ? 2 : 1));
}

std::string RowNormSpec::name() const {
  std::string layout = impl == RowNormImpl::kCluster || staged
                           ? "_b" + std::to_string(tpr) + "_c" + std::to_string(cluster)
                           : "_t" + std::to_string(tpr) + "_r" + std::to_string(rows);
  const char* kind = staged ? "_staged" : impl == RowNormImpl::kCluster ? "_cluster" : cache ? "_reg" : "_stream";
  const std::string qs = quant == RowNormQuant::kNone ? ""
                         : std::string(quant == RowNormQuant::kStatic ? "_qs" : "_qd") +
                               (qdtype == c10::ScalarType::Char ? "i8" : "f8e4m3");
  return std::string(op_stem(op, quant)) + qs + "__" + short_type_name(dtype) + "__n" + std::to_string(n) + "__v" +
         std::to_string(vec) + layout + (weight ? "_w" : "_nw") + (op == RowNormOp::kLayerNorm ? (bias ? "_b" : "_nb") : "") +
         (float_weight ? "_wf32" : "") + (gemma ? "_gemma" : "") + kind + (one_pass ? "_1p" : "") + "__" + arch;
}

std::string RowNormSpec::template_expression() const {
  const std::string head = std::string("<") + kernel_type_name(dtype) + ", " + std::to_string(n) + ", " +
                           std::to_string(vec) + ", " + std::to_string(tpr) + ", ";
  const std::string kernel = std::string("tileops::") + op_stem(op);
  if (op == RowNormOp::kLayerNorm) {
    const std::string wb = std::string(tf(weight)) + ", " + tf(bias);
    if (staged) return kernel + "_staged" + head + wb + ", " + tf(one_pass) + ">";
    return kernel + head + std::to_string(rows) + ", " + wb + ", " + tf(cache) + (float_weight ? ", float>" : ">");
  }
  if (quant != RowNormQuant::kNone)
    return std::string("tileops::") + op_stem(op, quant) + head + std::to_string(rows) + ", " +
           (qdtype == c10::ScalarType::Char ? "signed char" : "tileops::fp8_e4m3") + ", " +
           tf(quant == RowNormQuant::kDynamic) + ">";
  if (staged) return kernel + "_staged" + head + std::to_string(cluster) + ", " + tf(weight) + ">";
  if (impl == RowNormImpl::kCluster) return kernel + "_cluster" + head + std::to_string(cluster) + ", " + tf(weight) + ">";
  // The weight's type and the Gemma form are trailing template arguments, left to their defaults
  // (the row's dtype, plain) when they are: the same-dtype kernels keep their instantiation.
  const std::string tail = float_weight || gemma
                               ? std::string(", ") + (float_weight ? "float" : kernel_type_name(dtype)) + ", " + tf(gemma)
                               : "";
  return kernel + head + std::to_string(rows) + ", " + tf(weight) + ", " + tf(cache) + tail + ">";
}

std::vector<jit::KernelSource> RowNormSpec::sources() const {
  const char* header = op == RowNormOp::kLayerNorm ? (staged ? "norm/layer_norm_fwd_staged.cuh" : "norm/layer_norm_fwd.cuh")
                       : staged                    ? "norm/rms_norm_fwd_staged.cuh"
                       : impl == RowNormImpl::kCluster ? "norm/rms_norm_fwd_cluster.cuh"
                                                       : "norm/rms_norm_fwd.cuh";
  return {make_source(name(), header, template_expression(), arch)};
}

std::string RowNormSpec::describe() const {
  return std::string(op_stem(op, quant)) + "(dtype=" + short_type_name(dtype) + ", n=" + std::to_string(n) +
         ", weight=" + (weight ? (float_weight ? "float32" : "yes") : "no") + (gemma ? ", gemma" : "") +
         (quant == RowNormQuant::kNone ? ""
          : std::string(quant == RowNormQuant::kStatic ? ", static " : ", dynamic ") +
                (qdtype == c10::ScalarType::Char ? "int8" : "float8_e4m3fn")) +
         (op == RowNormOp::kLayerNorm ? (bias ? (float_weight ? ", bias=float32" : ", bias=yes") : ", bias=no") : "") +
         ", vec=" + std::to_string(vec) + ", impl=" + row_norm_impl_name(impl) + ")";
}

}  // namespace tileops::nvrtc

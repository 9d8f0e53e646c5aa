// Norm backward: the plan (problem, device, tuning -> spec), the grid, and what a spec renders.
#include "targets/nvrtc/norm/norm_bwd.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>

#include "targets/nvrtc/nvrtc_target.h"

namespace tileops::nvrtc {
namespace {
const char* tf(bool b) { return b ? "true" : "false"; }
}  // namespace

int norm_bwd_smem_budget(int max_smem_optin) {
  return std::min(kNormBwdSmemBudget, max_smem_optin - kNormBwdStaticSmem);
}

NormBwdTable norm_bwd_table(const Tuning& t) {
  NormBwdTable T = kNormBwdTable;
  if (t.norm_bwd_vecs_per_thread) T.vecs_per_thread = t.norm_bwd_vecs_per_thread;
  if (t.norm_bwd_cta_threads) T.cta_threads = t.norm_bwd_cta_threads;
  if (t.norm_bwd_blocks_per_sm) T.blocks_per_sm = t.norm_bwd_blocks_per_sm;
  if (t.norm_bwd_plain_reduce) T.plain_reduce = true;
  return T;
}

NormBwdSpec plan_norm_bwd(const NormBwdProblem& q, const DeviceFacts& dev, const Tuning& t) {
  const NormBwdTable T = norm_bwd_table(t);
  const int64_t n = q.n;
  TORCH_CHECK(n >= 1 && n <= (int64_t{1} << 24), "tileops: norm backward rows of 1..2^24 elements, got ", n);
  const int smem_budget = norm_bwd_smem_budget(dev.max_smem_optin);
  NormBwdSpec p{};
  p.dtype = q.dtype;
  p.layer = q.layer;
  p.n = static_cast<int>(n);
  p.has_weight = q.weight;
  p.dw = q.dw;
  p.db = q.layer && q.db;
  p.float_weight = q.float_weight;
  p.arch = dev.arch;
  const bool has_weight = q.weight, layer = q.layer;
  const int elem = static_cast<int>(c10::elementSize(q.dtype));
  const int welem = q.float_weight ? 4 : elem;
  p.vec = row_access_width(q.dtype, n, q.max_vec);
  const int64_t vecs = n / p.vec;
  // Threads per row as in the forward: about vecs_per_thread vectors a thread on up to 256 threads,
  // then up to 8 on wider CTAs.
  const int target = T.vecs_per_thread;
  p.tpr = std::min<int>(256, next_pow2((vecs + target - 1) / target));
  if ((vecs + p.tpr - 1) / p.tpr > 8) p.tpr = std::min<int>(1024, next_pow2((vecs + 7) / 8));
  const int64_t per = (vecs + p.tpr - 1) / p.tpr;
  const int nacc = int{p.dw} + int{p.db};
  const int64_t owned = per * p.vec;
  int64_t est = 0;
  // Staging, partials and registers for a number of row groups per CTA.
  auto decide = [&] {
    // Staging: cp.async moves 4, 8 or 16 bytes; two stages of the CTA's rows of x and dy, then the weight.
    const int64_t staged = 2LL * p.rows * 2 * n * elem + (has_weight ? n * welem : 0);
    p.smem = p.vec * elem >= 4 && per <= 16 && staged <= smem_budget;
    // Registers a thread needs: the partials (one fp32 per owned element and gradient), plus, when
    // the row is re-read from global memory, x/dy/w that the compiler may keep live between passes,
    // plus addresses, loop state and temporaries: 48 for RMSNorm, 64 for LayerNorm (three passes,
    // more row statistics). Calibrated with ptxas -v on sm_90a/sm_80; tests/kernels/
    // test_norm_bwd_nvrtc.cpp fails on spills.
    est = (layer ? 64 : 48) + owned * nacc + (p.smem ? 0 : (owned * (2 * elem + (has_weight ? welem : 0)) + 3) / 4);
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
  const int cta_threads = next_pow2(T.cta_threads);
  p.rows = p.tpr < cta_threads ? cta_threads / p.tpr : 1;
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
  // Staged RMSNorm rows of 8 KB and more, with dweight: one CTA an SM. Shorter rows, dx alone and
  // LayerNorm keep min_blocks.
  p.grid_per_sm = !layer && p.smem && p.dw && n * elem >= T.one_cta_min_row_bytes ? 1 : p.min_blocks;
  p.tuned_blocks_per_sm = T.blocks_per_sm;
  p.plain_reduce = T.plain_reduce;
  return p;
}

int norm_bwd_blocks_per_sm(const NormBwdSpec& p, const DeviceFacts& dev) {
  int b = p.tuned_blocks_per_sm > 0 ? std::min(p.tuned_blocks_per_sm, p.min_blocks) : p.grid_per_sm;
  b = std::min(b, dev.threads_per_sm / p.threads());
  b = std::min(b, dev.blocks_per_sm);
  // Beside the stages, each CTA's static reduction scratch (at most kNormBwdStaticSmem).
  b = std::min(b, dev.smem_per_sm / (p.smem_bytes + kNormBwdStaticSmem + dev.reserved_smem));
  return std::max(1, b);
}

int norm_bwd_max_grid(const NormBwdSpec& p, const DeviceFacts& dev) {
  int64_t g = int64_t{std::max(1, dev.sm_count)} * norm_bwd_blocks_per_sm(p, dev);
  const int nacc = int{p.dw} + int{p.db};
  if (nacc > 0) g = std::min<int64_t>(g, std::max<int64_t>(1, kNormBwdWorkspaceBudget / (int64_t{p.n} * 4 * nacc)));
  return static_cast<int>(g);
}

int64_t norm_bwd_grid(const NormBwdSpec& p, int64_t rows, int max_grid, int sm_count) {
  const int64_t groups = (rows + p.rows - 1) / p.rows;
  int64_t grid = std::min<int64_t>(max_grid, groups);
  // LayerNorm calls of few row groups a CTA run one CTA an SM: half the partial rows of dweight and
  // dbias to reduce, which costs more than a second CTA an SM gains over so short a walk. Not under
  // the norm_bwd_blocks_per_sm tuning key.
  if (p.layer && (p.dw || p.db) && p.tuned_blocks_per_sm == 0 && groups <= kNormBwdTable.few_walks * max_grid)
    grid = std::min<int64_t>(grid, std::max(1, sm_count));
  return grid;
}

std::string NormBwdSpec::name() const {
  return std::string(layer ? "layer_norm_bwd__" : "rms_norm_bwd__") + short_type_name(dtype) + "__n" +
         std::to_string(n) + "__v" + std::to_string(vec) + "_t" + std::to_string(tpr) + "_r" + std::to_string(rows) +
         "_b" + std::to_string(min_blocks) + (has_weight ? "_w" : "_nw") + (float_weight ? "f32" : "") +
         (dw ? "_dw" : "") + (db ? "_db" : "") +
         (smem ? "_smem" : "_gmem") + (acc_reg ? "_reg" : "_ws") + "__" + arch;
}

std::string NormBwdSpec::template_expression() const {
  std::string expr = std::string(layer ? "tileops::layer_norm_bwd<" : "tileops::rms_norm_bwd<") +
                     kernel_type_name(dtype) + ", " + std::to_string(n) + ", " + std::to_string(vec) + ", " +
                     std::to_string(tpr) + ", " + std::to_string(rows) + ", " + std::to_string(min_blocks) + ", " +
                     tf(has_weight) + ", " + tf(dw) + ", ";
  if (layer) expr += std::string(tf(db)) + ", ";
  // The weight's type is a trailing argument left to its default (T) unless it is float32 beside a 16-bit row.
  return expr + tf(smem) + ", " + tf(acc_reg) + (float_weight ? ", float>" : ">");
}

std::vector<jit::KernelSource> NormBwdSpec::sources() const {
  std::vector<jit::KernelSource> s{
      make_source(name(), layer ? "norm/layer_norm_bwd.cuh" : "norm/rms_norm_bwd.cuh", template_expression(), arch)};
  if (dw || db) s.push_back(norm_bwd_reduce_source(float_weight ? c10::kFloat : dtype, dw, db, arch));
  return s;
}

jit::KernelSource norm_bwd_reduce_source(c10::ScalarType dtype, bool dw, bool db, const std::string& arch) {
  const std::string expr =
      std::string("tileops::norm_bwd_reduce<") + kernel_type_name(dtype) + ", " + tf(dw) + ", " + tf(db) + ">";
  const std::string name = std::string("norm_bwd_reduce__") + short_type_name(dtype) + (dw ? "_dw" : "") +
                           (db ? "_db" : "") + "__" + arch;
  return make_source(name, "norm/norm_bwd_common.cuh", expr, arch);
}

std::string NormBwdSpec::describe() const {
  const std::string grads = std::string(dw ? "dweight" : "") + (dw && db ? "+" : "") + (db ? "dbias" : "");
  return std::string(layer ? "layer_norm_bwd(dtype=" : "rms_norm_bwd(dtype=") + short_type_name(dtype) +
         ", n=" + std::to_string(n) + ", weight=" + (has_weight ? (float_weight ? "float32" : "yes") : "no") +
         ", grads=dx" +
         (grads.empty() ? "" : "+" + grads) + ", vec=" + std::to_string(vec) + ")";
}

}  // namespace tileops::nvrtc

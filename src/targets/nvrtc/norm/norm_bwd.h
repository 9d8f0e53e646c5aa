// Norm backward on the nvrtc target: RMSNormBwdOp and LayerNormBwdOp share one problem, spec and plan
// (src/kernels/norm/{rms,layer}_norm_bwd.cuh, norm_bwd_common.cuh).
//
// A call: dx and the per-CTA partial rows of dweight/dbias from one persistent launch of G CTAs
// (G = norm_bwd_grid, fixed per spec, device and row count, so the summation order is too), then,
// when a weight gradient is wanted, norm_bwd_reduce sums the G partial rows per column in a fixed
// order (on sm_90+ a programmatic dependent launch of the main kernel, which hides the launch gap).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/tuning.h"

namespace tileops::nvrtc {

// Shared memory a plan may stage rows in: fits one CTA on sm_80 (164 KB per SM) and sm_90.
constexpr int kNormBwdSmemBudget = 160 * 1024;
// Static shared memory the backward kernels may use beside the dynamic stages (their reduction
// scratch: at most 1280 bytes, LayerNorm at 1024 threads a row); dynamic budgets leave this much.
constexpr int kNormBwdStaticSmem = 2048;
// Upper bound of the fp32 workspace of per-CTA partial rows (caps the grid for very long rows).
constexpr int64_t kNormBwdWorkspaceBudget = int64_t{256} << 20;

// The measured thresholds of the norm backward plans; the measurements are in docs/PERF.md, "Why
// the plans choose what they choose", Norm backward.
struct NormBwdTable {
  int vecs_per_thread = 4;            // as the forward's register rows
  int cta_threads = 256;              // short rows share a 256-thread CTA: fewer partial rows to sum
  int64_t one_cta_min_row_bytes = 8192;  // staged RMSNorm rows with dweight: one CTA an SM, half the partials
  int64_t few_walks = 8;              // LayerNorm calls of <= 8 row groups a CTA: one CTA an SM as well
  int blocks_per_sm = 0;              // > 0: CTAs an SM of the persistent grid, in place of the plan's
  bool plain_reduce = false;          // the reduction of the partial rows as a plain launch (tests)
};
constexpr NormBwdTable kNormBwdTable{};
// The table with the tuning's overrides (TILEOPS_TUNE, a developer tool): what the plans read.
NormBwdTable norm_bwd_table(const Tuning& t);

struct NormBwdProblem {
  bool layer;            // LayerNormBwdOp (else RMSNormBwdOp)
  c10::ScalarType dtype;
  int64_t n;             // row length (prod(normalized_shape))
  int max_vec;           // widest access the pointers' alignment allows
  bool weight;
  bool dw, db;           // dweight / dbias wanted (db: LayerNorm only)
  bool float_weight = false;  // a float32 weight beside a 16-bit row: dweight and dbias are float32 too
  TILEOPS_IDENTITY(NormBwdProblem, layer, dtype, n, max_vec, weight, dw, db, float_weight)
};

struct NormBwdSpec {
  c10::ScalarType dtype;
  bool layer;
  int n;             // row length
  int vec;           // elements per access
  int tpr;           // threads per row (power of two, <= 1024)
  int rows;          // row groups per CTA (CTA = tpr * rows threads)
  int min_blocks;    // __launch_bounds__ minimum CTAs per SM: caps registers at 64K / (threads * min_blocks)
  int grid_per_sm;   // CTAs per SM of the persistent grid (<= min_blocks; fewer where more measured slower)
  bool has_weight;
  bool dw, db;
  bool float_weight; // the weight, dweight and dbias are float32 beside a 16-bit row
  bool smem;         // rows staged in shared memory one row ahead (cp.async)
  bool acc_reg;      // per-column partials in registers (else in the CTA's workspace row)
  int smem_bytes;    // dynamic shared memory per CTA
  int tuned_blocks_per_sm = 0;  // the table's blocks_per_sm: > 0 replaces grid_per_sm (at most min_blocks)
  bool plain_reduce = false;    // the reduction is not a programmatic dependent launch
  std::string arch;
  int threads() const { return tpr * rows; }

  TILEOPS_IDENTITY(NormBwdSpec, dtype, layer, n, vec, tpr, rows, min_blocks, grid_per_sm, has_weight, dw, db,
                   float_weight, smem, acc_reg, smem_bytes, tuned_blocks_per_sm, plain_reduce, arch)
  std::string name() const;
  std::string template_expression() const;
  // The main kernel, then (with dweight or dbias) the reduction of the partial rows.
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

// The dynamic shared memory a plan may stage rows in on a device of this per-block opt-in limit: the
// static scratch must fit beside it.
int norm_bwd_smem_budget(int max_smem_optin);
NormBwdSpec plan_norm_bwd(const NormBwdProblem& q, const DeviceFacts& dev, const Tuning& t = {});
// The second kernel: sums the partial rows in a fixed order into dweight / dbias.
// `dtype` is the gradients' dtype (the weight's).
jit::KernelSource norm_bwd_reduce_source(c10::ScalarType dtype, bool dw, bool db, const std::string& arch);

// CTAs per SM of the persistent grid: the spec's grid_per_sm, bounded by the SM's threads, blocks and
// shared memory.
int norm_bwd_blocks_per_sm(const NormBwdSpec& s, const DeviceFacts& dev);
// The persistent grid's size for a device (before capping by the number of row groups of a call):
// fixed per build and device, so the order in which partials are summed never changes.
int norm_bwd_max_grid(const NormBwdSpec& s, const DeviceFacts& dev);
// The launch grid of a call of `rows` rows: at most max_grid CTAs and one a row group; one CTA an SM
// for short LayerNorm calls. Fixed by spec, device and rows, so the order of the sums is too.
int64_t norm_bwd_grid(const NormBwdSpec& s, int64_t rows, int max_grid, int sm_count);

}  // namespace tileops::nvrtc

// RMSNormBwdOp and LayerNormBwdOp on the nvrtc target: planning (which specialisation of
// src/kernels/norm/{rms,layer}_norm_bwd.cuh serves a row length), the grid, and the kernel builder
// shared by both ops (norm_layer_norm_bwd.cpp registers the LayerNorm one).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "jit/nvrtc_compiler.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

// Shared memory a plan may stage rows in: fits one CTA on sm_80 (164 KB per SM) and sm_90.
constexpr int kNormBwdSmemBudget = 160 * 1024;
// Static shared memory the backward kernels may use beside the dynamic stages (their reduction
// scratch: at most 1280 bytes, LayerNorm at 1024 threads a row); dynamic budgets leave this much.
constexpr int kNormBwdStaticSmem = 2048;
// Upper bound of the fp32 workspace of per-CTA partial rows (caps the grid for very long rows).
constexpr int64_t kNormBwdWorkspaceBudget = int64_t{256} << 20;

struct NormBwdPlan {
  c10::ScalarType dtype;
  bool layer;        // LayerNormBwdOp (else RMSNormBwdOp)
  int n;             // row length (prod(normalized_shape))
  int vec;           // elements per access
  int tpr;           // threads per row (power of two, <= 1024)
  int rows;          // row groups per CTA (CTA = tpr * rows threads)
  int min_blocks;    // __launch_bounds__ minimum CTAs per SM: caps registers at 64K / (threads * min_blocks)
  int grid_per_sm;   // CTAs per SM of the persistent grid (<= min_blocks; fewer where more measured slower)
  bool has_weight;
  bool dw, db;       // dweight / dbias wanted (db: LayerNorm only)
  bool smem;         // rows staged in shared memory one row ahead (cp.async)
  bool acc_reg;      // per-column partials in registers (else in the CTA's workspace row)
  uint32_t eps_bits; // float32 eps, bit pattern
  int smem_bytes;    // dynamic shared memory per CTA
  int threads() const { return tpr * rows; }
};

// max_vec: the widest access the pointers' alignment allows; smem_budget: most dynamic shared memory
// the plan may stage rows in (the device's opt-in limit, at most kNormBwdSmemBudget).
NormBwdPlan plan_norm_bwd(c10::ScalarType dtype, int64_t n, bool layer, bool has_weight, bool dw, bool db, float eps,
                          int max_vec, int smem_budget = kNormBwdSmemBudget);
std::string norm_bwd_name(const NormBwdPlan& p, const std::string& arch);
jit::KernelSource norm_bwd_source(const NormBwdPlan& p, const std::string& arch);
// The second kernel: sums the partial rows in a fixed order into dweight / dbias.
jit::KernelSource norm_bwd_reduce_source(c10::ScalarType dtype, bool dw, bool db, const std::string& arch);

// Resources of one SM (device attributes) that bound how many CTAs of a plan are resident at once.
struct SmResources {
  int threads = 2048;
  int blocks = 32;
  int smem = 228 * 1024;           // shared memory per SM
  int reserved_smem = 1024;        // per CTA, taken by the system
};
// CTAs per SM of the persistent grid: the plan's grid_per_sm, bounded by threads and shared memory.
int norm_bwd_blocks_per_sm(const NormBwdPlan& p, const SmResources& sm);
// The dynamic shared memory a plan may stage rows in on a device of this per-block opt-in limit: the
// static scratch must fit beside it.
int norm_bwd_smem_budget(int max_smem_optin);
// The persistent grid's size for a device (before capping by the number of row groups of a call):
// fixed per build and device, so the order in which partials are summed never changes.
int norm_bwd_max_grid(const NormBwdPlan& p, int sm_count, const SmResources& sm);
// The launch grid of a call of `rows` rows: at most max_grid CTAs and one a row group; fewer for
// short LayerNorm calls (one CTA an SM; see the definition). Fixed by plan, device and rows, so the
// order of the dweight/dbias sums is too.
int64_t norm_bwd_grid(const NormBwdPlan& p, int64_t rows, int max_grid, int sm_count);

// Where an op keeps the tensors and params (indices into OpCall); dbias = -1 for RMSNorm.
struct NormBwdSlots {
  bool layer;
  int dy, x, weight;
  int dx, dweight, dbias;
  int normalized_shape, eps;
};
KernelBuilder make_norm_bwd_builder(NormBwdSlots slots);

}  // namespace tileops::nvrtc

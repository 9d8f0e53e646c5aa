// RMSNormFwdOp on the nvrtc target: planning (which specialisation of src/kernels/norm/rms_norm_fwd.cuh
// serves a row length) and the kernel builder.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

// The three implementations (src/kernels/norm/): which one serves a row is chosen by what each
// declares it applies to and which it is preferred over (rms_norm_implementations()).
enum class RmsNormImpl : int {
  kRegisterResident = 0,  // one CTA (or a slice of one) per row, the row in registers
  kCluster = 1,           // sm_90+: a thread-block cluster per row, partial sums through DSMEM
  kStreaming = 2,         // any row: two passes, the second walking back through L2
  kStaged = 3,            // sm_90+, 16-byte accesses, RMSNorm rows of 16..32 KB and the fused add's of
                          // 32..64 KB: one CTA per row, x (and the residual) in shared memory
};

// What the choice depends on: the row, its access width, and the device's compute capability
// (clusters need sm_90).
struct RmsNormProblem {
  c10::ScalarType dtype;
  int64_t n;
  int vec;       // elements per access
  int cc_major;  // 0: unknown (no cluster)
  bool add_residual = false;  // FusedAddRMSNormFwdOp
};

struct RmsNormPlan {
  RmsNormImpl impl;
  c10::ScalarType dtype;
  int n;             // row length (prod(normalized_shape))
  int vec;           // elements per access (16 bytes when the row and pointers allow)
  int tpr;           // threads per row (power of two, <= 1024); per CTA for kCluster
  int rows;          // rows per CTA
  int cluster = 1;   // CTAs per row (kCluster)
  bool has_weight;
  bool cache;        // row kept in registers between the two passes
  uint32_t eps_bits; // float32 eps, bit pattern
  bool add_residual = false;  // FusedAddRMSNormFwdOp
  bool staged = false;        // kStaged, or kCluster with the chunk in shared memory (bulk copies), not registers
  bool one_pass = false;      // LayerNorm's staged rows: mean and variance from one pass of shifted sums
};

// Rows that one CTA stages in shared memory (kStaged, and LayerNorm's staged kernel): sm_90+ (bulk
// copies), 16-byte accesses, rows of min_row_bytes (the op's default; TILEOPS_STAGED_MIN_ROW_BYTES
// overrides it for tuning sweeps) up to 64 KB.
bool staged_row_applies(c10::ScalarType dtype, int64_t n, int vec, int cc_major, int min_row_bytes);
// Threads a CTA of a staged row: about `per_thread` vectors a thread (the op's default;
// TILEOPS_STAGED_ROW_VPT overrides it for tuning sweeps), 32..1024.
int staged_row_threads(int64_t vecs, int per_thread);
// Turns a plan into a staged row (kStaged): one CTA of staged_row_threads(vecs, per_thread) per row.
void plan_staged(RmsNormPlan& p, int per_thread);

// Dynamic shared memory a launch of the plan needs (the staged cluster chunk; 0 otherwise).
int rms_norm_smem_bytes(const RmsNormPlan& p);

// Where an op keeps the tensors and params the RMSNorm kernels use (indices into OpCall).
struct RmsNormSlots {
  int x, residual, weight;  // residual = -1 when the op has none
  int y, residual_out;
  int normalized_shape, eps;
};

const std::vector<Implementation<RmsNormProblem>>& rms_norm_implementations();
const char* rms_norm_impl_name(RmsNormImpl impl);

// max_vec: the widest access the pointers' alignment allows (1..16/elem_size). cc_major: the
// device's compute capability (0 = unknown: never a cluster).
RmsNormPlan plan_rms_norm(c10::ScalarType dtype, int64_t n, bool has_weight, float eps, int max_vec,
                          bool add_residual = false, int cc_major = 0);
std::string rms_norm_name(const RmsNormPlan& p, const std::string& arch);
jit::KernelSource rms_norm_source(const RmsNormPlan& p, const std::string& arch);
KernelBuilder rms_norm_fwd_builder();
// The builder shared by RMSNormFwdOp and FusedAddRMSNormFwdOp.
KernelBuilder make_rms_norm_builder(RmsNormSlots slots);

}  // namespace tileops::nvrtc

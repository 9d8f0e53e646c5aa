// SoftmaxFwdOp and LogSoftmaxFwdOp on the nvrtc target (one kernel source, a LOG flag): planning
// (which specialisation of src/kernels/reduction/softmax_fwd.cuh serves a row length) and builders.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

// The implementations (src/kernels/reduction/), chosen by what each declares it applies to and
// which it is preferred over (softmax_implementations()).
enum class SoftmaxImpl : int {
  kRowPerCta = 0,  // softmax_fwd: a CTA (or a warp slice of one) per row; any row
  kSplit = 1,      // softmax_split_stats + softmax_split_apply: few long rows, two launches
  kCluster = 2,    // softmax_fwd_cluster (sm_90+): few long rows, a cluster per row, one launch
  kStaged = 3,     // softmax_fwd_staged (sm_90+, 16-byte accesses): a CTA per row of 8..64 KB, in shared memory
};

struct SoftmaxProblem {
  c10::ScalarType dtype;
  int64_t n;
  int vec;
  int64_t rows;
  int cc_major;  // 0: unknown (no cluster)
};

struct SoftmaxPlan {
  SoftmaxImpl impl;
  c10::ScalarType dtype;
  int n;        // row length (size of the reduced dim)
  int vec;      // elements per access (16 bytes when the row and pointers allow)
  bool log;     // log_softmax
  // One CTA (or a warp slice of one) per row: softmax_fwd.
  int tpr;      // threads per row (power of two, <= 1024)
  int rows;     // rows per CTA
  bool cache;   // row kept in registers (one read)
  // splits > 1: softmax_split_stats + softmax_split_apply, rows * splits CTAs of tpb threads each.
  int splits;
  int tpb;      // threads per CTA for kSplit and kCluster
  int cluster;  // CTAs per row for kCluster
};

// Dynamic shared memory a launch of the plan needs (kStaged: the row; 0 otherwise).
int softmax_smem_bytes(const SoftmaxPlan& p);

// Long rows with few of them (lm-head logits) would leave most SMs idle with one CTA a row: those
// split each row over several CTAs (kSplit, kCluster). Decided per call from (n, rows), so the
// implementation is part of the identity.
bool softmax_wants_split(int64_t n, int64_t rows);

const std::vector<Implementation<SoftmaxProblem>>& softmax_implementations();
const char* softmax_impl_name(SoftmaxImpl impl);
// max_vec: the widest access the pointers' alignment allows; cc_major 0 = unknown (no cluster).
SoftmaxImpl select_softmax(c10::ScalarType dtype, int64_t n, int max_vec, int64_t rows, int cc_major);
SoftmaxPlan plan_softmax(c10::ScalarType dtype, int64_t n, bool log, int max_vec, SoftmaxImpl impl);
std::string softmax_name(const SoftmaxPlan& p, const std::string& arch);
// One source (softmax_fwd) or two (split: stats, then apply).
std::vector<jit::KernelSource> softmax_sources(const SoftmaxPlan& p, const std::string& arch);
KernelBuilder softmax_fwd_builder();
KernelBuilder log_softmax_fwd_builder();

}  // namespace tileops::nvrtc

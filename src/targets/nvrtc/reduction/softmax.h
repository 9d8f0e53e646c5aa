// SoftmaxFwdOp and LogSoftmaxFwdOp on the nvrtc target (one kernel source, a LOG flag): problem, spec
// and plan (src/kernels/reduction/softmax_fwd*.cuh).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/tuning.h"

namespace tileops::nvrtc {

// The implementations (src/kernels/reduction/), chosen by what each declares it applies to and
// which it is preferred over (softmax_implementations()).
enum class SoftmaxImpl : int {
  kRowPerCta = 0,  // softmax_fwd: a CTA (or a warp slice of one) per row; any row
  kSplit = 1,      // softmax_split_stats + softmax_split_apply: few long rows, two launches
  kCluster = 2,    // softmax_fwd_cluster (sm_90+): few long rows, a cluster per row, one launch
  kStaged = 3,     // softmax_fwd_staged (sm_90+, 16-byte accesses): a CTA per row of 8..64 KB, in shared memory
};

// The measured thresholds of the softmax plans; the measurements are in docs/PERF.md, "Why the plans
// choose what they choose", Softmax and log-softmax.
struct SoftmaxTable {
  int64_t split_min_n = 16384;     // long rows ...
  int64_t split_max_rows = 128;    // ... with few of them leave SMs idle at one CTA a row: split them
  int vecs_per_thread = 2;         // row-per-CTA rows: 4 or 8 a thread were slower
  int cluster_cta_bytes = 16384;   // few long rows: more, smaller CTAs a cluster
  int cluster_max = 16;
  int cluster_vpt = 4;             // vectors a thread of a register cluster chunk
  int staged_min_row_bytes = 8192; // from 8 KB staging frees the registers that bound the row
  int staged_vpt = 4;
  int staged_long_row_bytes = 32768;  // from 32 KB rows, 16 a thread: at 4, threads rather than
  int staged_long_vpt = 16;           // shared memory would cap the CTAs an SM
  int split_tpb = 256;             // chunks of about 2048 elements on 256 threads, 2..64 a row
  int split_chunk = 2048;
  int split_max = 64;
};
constexpr SoftmaxTable kSoftmaxTable{};
// The table with the tuning's overrides (TILEOPS_TUNE, a developer tool): what the plans read.
SoftmaxTable softmax_table(const Tuning& t);

struct SoftmaxProblem {
  bool log;
  c10::ScalarType dtype;
  int64_t n;       // row length
  int max_vec;     // widest access the pointers' alignment allows
  bool few_rows;   // fewer than split_max_rows rows in the call (long rows then split)
  TILEOPS_IDENTITY(SoftmaxProblem, log, dtype, n, max_vec, few_rows)
};

struct SoftmaxSpec {
  SoftmaxImpl impl;
  c10::ScalarType dtype;
  int n;        // row length (size of the reduced dim)
  int vec;      // elements per access (16 bytes when the row and pointers allow)
  bool log;     // log_softmax
  int tpr;      // threads per row (power of two, <= 1024), kRowPerCta
  int rows;     // rows per CTA, kRowPerCta
  bool cache;   // row kept in registers (one read)
  int splits;   // kSplit: CTAs a row
  int tpb;      // threads per CTA for kSplit, kCluster and kStaged
  int cluster;  // CTAs per row for kCluster
  std::string arch;

  TILEOPS_IDENTITY(SoftmaxSpec, impl, dtype, n, vec, log, tpr, rows, cache, splits, tpb, cluster, arch)
  int smem_bytes() const;  // kStaged: the row; 0 otherwise
  std::string name() const;
  // One source (softmax_fwd) or two (split: stats, then apply).
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

struct SoftmaxQuery {
  const SoftmaxProblem& q;
  int vec;
  const DeviceFacts& dev;
  const SoftmaxTable& T;
};
const std::vector<Implementation<SoftmaxQuery>>& softmax_implementations();
const char* softmax_impl_name(SoftmaxImpl impl);

// Whether a call's rows count as few (the problem's few_rows).
inline bool softmax_few_rows(int64_t rows) { return rows < kSoftmaxTable.split_max_rows; }
SoftmaxSpec plan_softmax(const SoftmaxProblem& q, const DeviceFacts& dev, const Tuning& t = {});
// The spec of a given implementation (plan_softmax after choosing it; tests).
SoftmaxSpec plan_softmax_as(SoftmaxImpl impl, const SoftmaxProblem& q, const DeviceFacts& dev, const Tuning& t = {});

}  // namespace tileops::nvrtc

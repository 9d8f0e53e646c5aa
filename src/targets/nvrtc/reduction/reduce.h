// The dim reductions on the nvrtc target (SumFwdOp ... LogSumExpFwdOp): one engine
// (src/kernels/reduction/reduce.cuh). A call's x is seen as [M, N, I] (outer, reduced, inner) after
// size-1 dims are dropped and neighbouring dims of one kind merged; a reduction that is not one
// block of dims between kept ones (e.g. dims 0 and 2 of a 3-d x) is gathered first, reduced dims last.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "kernels/common/op_ids.cuh"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/tuning.h"

namespace tileops::nvrtc {

// The kernels' ids (kernels/common/op_ids.cuh).
enum class ReduceOp : int {
  Sum = kReduceSum, Mean = kReduceMean, Amax = kReduceAmax, Amin = kReduceAmin, Prod = kReduceProd,
  Var = kReduceVar, Std = kReduceStd, VarMean = kReduceVarMean, Argmax = kReduceArgmax, Argmin = kReduceArgmin,
  All = kReduceAll, Any = kReduceAny, CountNonzero = kReduceCountNonzero, L1 = kReduceL1, L2 = kReduceL2,
  Inf = kReduceInf, LogSumExp = kReduceLogSumExp,
};
const char* reduce_op_name(ReduceOp op);
// Bytes of the op's partial state in a split's workspace (reduce.cuh's Reducer<OP>::State).
int reduce_state_bytes(ReduceOp op);

enum class ReduceImpl : int {
  kRows = 0,  // I == 1: a warp slice, a warp or a CTA a row (by N)
  kCols = 1,  // I > 1: warps stride over n, lanes own adjacent columns
};

// The thresholds of the reduction plans: first values from the bandwidth arithmetic (enough bytes in
// flight an SM), to be replaced by measurements (scripts/bench/bench_reduction.py).
struct ReduceTable {
  int vecs_per_thread = 4;    // loads a thread keeps in flight before a row takes more threads
  int cta_threads = 256;
  int max_tpr = 1024;
  int cols_warps = 8;         // warps of a column CTA (they stride over n)
  int fill_ctas_per_sm = 4;   // 256-thread CTAs an SM a split aims at; under half of it, split
  int min_split_vecs = 4;     // rows: vectors a thread at least, per split
  int cols_split_rows = 64;   // columns: rows a warp at least, per split
  int max_splits = 4096;
  int cols_max_vec = 16;      // elements a lane loads at once over columns (at most 16 bytes)
  int cols_min_vec = 4;       // ... and at least, when narrowing lanes to avoid a split
  int cols_state_bytes = 32;  // a lane's column states at most (registers, and the CTA's shared merge)
  TILEOPS_IDENTITY(ReduceTable, vecs_per_thread, cta_threads, max_tpr, cols_warps, fill_ctas_per_sm, min_split_vecs,
                   cols_split_rows, max_splits, cols_max_vec, cols_min_vec, cols_state_bytes)
};
constexpr ReduceTable kReduceTable{};
// The table with the tuning's overrides (TILEOPS_TUNE, a developer tool): what the plans read.
ReduceTable reduce_table(const Tuning& t);

// [M, N, I] of a contiguous x and the reduced dims' bit mask; gather: the reduced dims are not one
// block, so x is first permuted (kept dims, then reduced dims) and copied, giving [M, N, 1].
struct ReduceGeometry {
  int64_t M = 1, N = 1, I = 1;
  bool gather = false;
};
ReduceGeometry reduce_geometry(c10::IntArrayRef sizes, uint64_t mask);

struct ReduceProblem {
  ReduceOp op;
  c10::ScalarType x_dtype;
  c10::ScalarType c_dtype;  // elements are rounded to it first (dtype=), else x_dtype
  c10::ScalarType y_dtype;
  int64_t M, N, I;
  int max_vec;  // widest access (elements) x's alignment allows
  TILEOPS_IDENTITY(ReduceProblem, op, x_dtype, c_dtype, y_dtype, M, N, I, max_vec)
};

struct ReduceSpec {
  ReduceImpl impl;
  ReduceOp op;
  c10::ScalarType x_dtype, c_dtype, y_dtype;
  int vec;     // elements an access (along n for rows, along i for columns)
  int tpr;     // kRows: threads a row (power of two)
  int rows;    // kRows: rows a CTA
  int warps;   // kCols: warps a CTA
  bool split;  // a second pass merges `splits` partial states an output (splits is a launch argument)
  std::string arch;
  ReduceTable table;  // the plan's table: the launch derives `splits` from it

  TILEOPS_IDENTITY(ReduceSpec, impl, op, x_dtype, c_dtype, y_dtype, vec, tpr, rows, warps, split, arch, table)
  int threads() const { return impl == ReduceImpl::kRows ? tpr * rows : 32 * warps; }
  std::string name() const;
  // The pass over x, then (split) reduce_finish.
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

ReduceSpec plan_reduce(const ReduceProblem& q, const DeviceFacts& dev, const Tuning& t = {});
// CTAs a row (kRows) or a column block (kCols) shares its reduced extent among; 1: no second pass.
// A pure function of the problem, so the launch recomputes it from the call.
int reduce_splits(const ReduceProblem& q, const DeviceFacts& dev, const ReduceTable& T = kReduceTable);

}  // namespace tileops::nvrtc

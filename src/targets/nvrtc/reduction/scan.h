// The scans on the nvrtc target (CumsumFwdOp, CumprodFwdOp, LogCumSumExpFwdOp): one engine (src/kernels/reduction/scan.cuh).
// A call's x is seen as [M, N, I] (outer, scanned, inner): rows (I == 1) scan along contiguous memory,
// columns (I > 1) walk n with threads over the inner index; neither copies x. Few rows or columns for
// the device split n: rows into tiles scanned in one pass, each taking the prefix of the tiles before
// it (decoupled look-back); columns into slices, a first pass writing each slice's total and a middle
// pass turning them into carries before the scan pass.
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
enum class ScanOp : int { Sum = kScanSum, Prod = kScanProd, LogSumExp = kScanLogSumExp };
const char* scan_op_name(ScanOp op);

enum class ScanImpl : int {
  kRows = 0,  // I == 1: TPR threads a row, chunks of TPR * VEC with a carry
  kCols = 1,  // I > 1: a thread per VEC adjacent columns, sequential along n
};

// The thresholds of the scan plans: first values from the bandwidth arithmetic (enough threads to fill
// the device), to be replaced by measurements (scripts/bench/bench_reduction.py).
struct ScanTable {
  int cta_threads = 256;     // threads of a CTA of short rows, of a split row and of column scans
  int max_tpr = 1024;        // threads a row at most
  int fill_threads_per_sm = 1024;  // fewer busy threads than this per SM: split n into slices
  int min_split_chunks = 4;  // chunks (TPR * VEC elements) of a row slice at least
  int min_split_rows = 64;   // n a column slice at least
  int max_splits = 1024;
  int chained_chunks = 4;    // chunks (cta_threads vectors) a tile of a chained row scan holds in registers, at most
  int chained_words = 32;    // and at most this many 4-byte accumulator words a thread
};
constexpr ScanTable kScanTable{};

// [M, N, I] of a contiguous x of `sizes` scanned along `dim` (wrapped; a 0-dim x is [1, 1, 1]).
struct ScanGeometry {
  int64_t M = 1, N = 1, I = 1;
};
ScanGeometry scan_geometry(c10::IntArrayRef sizes, int64_t dim);

struct ScanProblem {
  ScanOp op;
  c10::ScalarType x_dtype;
  c10::ScalarType y_dtype;  // also the type x is cast to first (dtype=)
  int64_t M, N, I;
  int max_vec;  // widest access (elements) x's and y's alignment allow
  TILEOPS_IDENTITY(ScanProblem, op, x_dtype, y_dtype, M, N, I, max_vec)
};

struct ScanSpec {
  ScanImpl impl;
  ScanOp op;
  c10::ScalarType x_dtype, y_dtype;
  int vec;     // elements an access (along n for rows, along i for columns)
  int tpr;     // kRows: threads a row (power of two)
  int rows;    // kRows: rows a CTA
  bool split;  // rows: the chained one-pass kernel; columns: a first pass writes slice totals
  std::string arch;

  TILEOPS_IDENTITY(ScanSpec, impl, op, x_dtype, y_dtype, vec, tpr, rows, split, arch)
  int threads() const { return impl == ScanImpl::kRows ? tpr * rows : kScanTable.cta_threads; }
  std::string name() const;
  // The scan pass, then (split columns) the totals pass and the carries pass.
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

ScanSpec plan_scan(const ScanProblem& q, const DeviceFacts& dev, const Tuning& t = {});
// Slices n is cut into (1: no totals pass). A pure function of the problem, so the launch recomputes it.
int scan_splits(const ScanProblem& q, const DeviceFacts& dev);
// Bytes of one accumulator (a slice total): 4 (float), 8 (double, int64).
int scan_acc_bytes(c10::ScalarType y_dtype);
// Tiles a row of a chained row scan is cut into, and the bytes of the state its look-back shares
// (flags, aggregates, inclusive prefixes, the tile counter; zeroed before the launch).
int scan_chain_chunks(const ScanSpec& s);
int64_t scan_chain_tiles(const ScanSpec& s, int64_t N);
int64_t scan_chain_state_bytes(const ScanSpec& s, int64_t M, int64_t N);

}  // namespace tileops::nvrtc

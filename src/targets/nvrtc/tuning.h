// Tuning overrides of the nvrtc plans, a developer tool for measurement sweeps (scripts/bench/sweep.py):
// one variable, TILEOPS_TUNE="key=value,key=value", read once a process. Unset keys leave the plans'
// defaults (the tuning tables in each family's plan); an unknown key or an out-of-range value is an
// error naming the key. Not an interface: the set of keys follows the plans.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tileops::nvrtc {

// One override each; 0 = not set (the plan's default).
struct Tuning {
  int rms_vecs_per_thread = 0;       // row-per-CTA norm rows: vectors a thread before wider rows
  int rms_few_rows_vpt = 0;          // the same for calls of few RMSNorm rows
  int softmax_vecs_per_thread = 0;   // row-per-CTA softmax rows: the same
  int staged_min_row_bytes = 0;      // shortest row a staged (shared-memory) row kernel serves
  int staged_row_vpt = 0;            // vectors a thread of a staged row
  int staged_cluster_vpt = 0;        // vectors a thread of a staged cluster chunk (RMSNorm)
  int cluster_cta_bytes = 0;         // bytes of a row a cluster CTA holds
  int cluster_vpt = 0;               // vectors a thread of a register cluster chunk
  int cluster_max = 0;               // largest cluster
  int norm_bwd_vecs_per_thread = 0;  // norm backward: vectors a thread before wider rows
  int norm_bwd_cta_threads = 0;      // norm backward: threads a CTA of short rows
  int norm_bwd_blocks_per_sm = 0;    // norm backward: CTAs an SM of the persistent grid
  int act_ctas_per_sm = 0;           // elementwise activations: grid cap, CTAs an SM
  int ew_unroll = 0;                 // elementwise contiguous loop: vector steps a thread in flight
  int ew_threads = 0;                // elementwise contiguous loop: most threads a CTA
  int norm_bwd_plain_reduce = 0;     // 1: the norm backward reduction is not a dependent launch (tests)
  int pool_max_outputs = 0;          // max pools with a fixed window (pool_fwd): outputs a thread, 1 or 2
  int reduce_cols_warps = 0;         // dim reductions over columns: warps a CTA
  int reduce_ctas_per_sm = 0;        // dim reductions: CTAs an SM below which the reduced extent splits
  int reduce_split_vecs = 0;         // dim reductions over rows: vectors a thread at least, a split
  int reduce_cols_split_rows = 0;    // dim reductions over columns: rows a warp at least, a split
  int reduce_cols_vec = 0;           // dim reductions over columns: most elements a lane loads at once
  int gn_vecs_per_thread = 0;        // group/instance norm rows (input stats): vectors a thread
  int gn_running_vecs_per_thread = 0;  // the same with running stats (no reduction)
  int gn_cta_threads = 0;            // group/instance norm rows of a warp or less: threads a CTA
  int moe_max_rows_per_expert = 0;   // MoE grouped GEMM: the one launch's bound outside a capture

  bool operator==(const Tuning& o) const;
};

struct TuningKey {
  const char* name;  // as written in TILEOPS_TUNE
  int Tuning::*field;
  int lo, hi;        // accepted values
  const char* what;
  bool pow2 = false;  // only powers of two (threads or steps whose products must stay whole warps or chunks)
  // Op classes whose kernels this key turns on before a GPU has run them (comma-separated): listed
  // with the pending kernels (python -m tileops.pending) until the GPU round makes them the default.
  const char* pending_ops = nullptr;
};
const std::vector<TuningKey>& tuning_keys();
// "key  lo..hi  what" lines, one a key (scripts/bench/sweep.py --list-tune prints them).
std::string describe_tuning_keys();

// Parses "key=value,..." (empty: no overrides). Throws c10::Error naming the variable and the key for
// an unknown key, a malformed entry, a value out of range or, for a pow2 key, not a power of two.
Tuning parse_tuning(std::string_view text);
// TILEOPS_TUNE of this process, parsed on first use.
const Tuning& tuning();

}  // namespace tileops::nvrtc

// The pool family on the nvrtc target (manifests/pool.yaml): AvgPool{1,2,3}dFwdOp,
// MaxPool{1,2,3}dFwdOp, AdaptiveAvgPool2dFwdOp and AdaptiveMaxPool2dFwdOp, all served by
// src/kernels/pool/pool_fwd.cuh: pool_fwd (a thread an output or two) or, for windows of 32+ taps in
// a row, pool_fwd_warp (8 to 32 lanes an output), and for pools whose neighbouring outputs read
// one 16-byte vector a row, pool_fwd_wide. The spec is (dtype, spatial rank, avg or max,
// adaptive, index type, lanes an output, outputs from a vector, and a small window's
// kernel/stride/padding/dilation, which the kernel's code then holds); sizes, a large window,
// count_include_pad and divisor_override are launch arguments. The max pools with indices have a
// kernel of their own (PoolIndicesSpec, at the end).
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <array>
#include <optional>

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
enum class PoolMode : int { Avg = kPoolAvg, Max = kPoolMax };

// kernel, stride, padding and dilation of the kernel's dims 0..2 (the op's dims last), 12 values; all
// zero where the window is not small enough to be written into a kernel (pool_small_window).
using PoolWindowParams = std::array<int, 12>;

struct PoolProblem {
  c10::ScalarType dtype;
  int rank;  // spatial dims pooled: 1, 2 or 3
  PoolMode mode;
  bool adaptive;
  int index_bits = 64;  // 32 when every index and product of the call fits in int (pool_index_bits)
  PoolWindowParams window{};
  int lanes = 0;  // pool_fwd_warp's lanes an output for 32+ taps in a row (pool_lanes), else 0
  int wide = 0;   // pool_fwd_wide's outputs a work item (pool_wide_outputs), else 0
  bool short_rows = false;  // rows of few outputs (pool_short_rows)
  TILEOPS_IDENTITY(PoolProblem, dtype, rank, mode, adaptive, index_bits, window, lanes, wide, short_rows)
};

struct PoolSpec {
  c10::ScalarType dtype;
  int rank;
  PoolMode mode;
  bool adaptive;
  int index_bits;  // 32 or 64: the kernel's index type
  int threads;     // a CTA's threads (at most, pool_cta_threads): one work item each (pool_units), or `lanes` for each
  std::string arch;
  PoolWindowParams window{};  // nonzero: the window the kernel's code holds (PoolWindow<...>)
  int lanes = 0;              // nonzero: pool_fwd_warp, this many lanes an output (never a fixed window)
  int wide = 0;               // nonzero: pool_fwd_wide, this many outputs a work item
  bool single = false;        // a max pool with a fixed window on pool_fwd, one output a thread, not two
                              // (short rows, or TILEOPS_TUNE=pool_max_outputs=1)
  bool fixed_window() const { return window[0] != 0; }
  // neighbouring outputs along the last dim a work item (pool_fwd's P, or pool_fwd_wide's)
  int outputs_a_thread() const {
    return wide ? wide : mode == PoolMode::Max && fixed_window() && !single ? 2 : 1;
  }
  int items_a_cta() const { return lanes ? threads / lanes : threads; }
  TILEOPS_IDENTITY(PoolSpec, dtype, rank, mode, adaptive, index_bits, threads, arch, window, lanes, wide, single)
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

// The kernel's PoolGeometry (pool_fwd.cuh): the R spatial dims last, the dims before them 1.
struct PoolGeometry {
  int64_t in[3];
  int64_t out[3];
  int64_t kernel[3];
  int64_t stride[3];
  int64_t pad[3];
  int64_t dil[3];
};
static_assert(sizeof(PoolGeometry) == 18 * 8, "PoolGeometry mirrors the kernel's: 18 int64 fields");

// The kernel's PoolDividers: a multiply-high divider (src/kernels/common/int_divider.cuh) for each
// output dim, for the int index path.
struct PoolDividers {
  uint32_t out[3][2];  // magic, shift
};
static_assert(sizeof(PoolDividers) == 24, "PoolDividers mirrors the kernel's: 3 x (magic, shift)");

// Pure: the kernel a problem takes on a device.
PoolSpec plan_pool(const PoolProblem& q, const DeviceFacts& dev, const Tuning& t = Tuning{});
std::string pool_name(const PoolSpec& s);
jit::KernelSource pool_source(const PoolSpec& s);
// The geometry of one call: input and output sizes (their last `rank` dims), and kernel_size,
// stride (empty: kernel_size), padding and dilation (empty: 1) as the op gave them, a one-element
// list standing for every dim. Adaptive pools pass empty lists.
PoolGeometry pool_geometry(c10::IntArrayRef in_sizes, c10::IntArrayRef out_sizes, int rank, c10::IntArrayRef kernel,
                           c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation);
// 32 when the kernel's int index math cannot overflow for these sizes and this geometry: both
// tensors below 2^30 elements, and per dim (out + 1) * max(in, stride) + kernel * dilation + 2 * pad
// (the largest window bound or adaptive product formed) below 2^30, so that every index, a bin's
// ceil numerator (o + 1) * in + out - 1 and the grid stride stay below 2^31; else 64.
int pool_index_bits(int64_t in_numel, int64_t out_numel, const PoolGeometry& g);
// The window's 12 values when it is small enough to be written into a kernel's code (at most 128
// taps, every value below 256; a kernel of its own for each such window), else all zero.
PoolWindowParams pool_small_window(const PoolGeometry& g);
// The taps of a window in a row: its last dim's taps or, where windows cover the last dim (and then
// the next) whole with step 1, the taps of those dims together.
int64_t pool_row_taps(const PoolGeometry& g, bool adaptive);
// pool_fwd_warp's lanes an output for a row of 32 or more taps (read coalesced by the lanes, where a
// thread an output reads them alone): 8 up to 64 taps, 16 up to 256, else 32; 0 below 32 taps.
int pool_lanes(const PoolGeometry& g, bool adaptive);
// The outputs a work item of pool_fwd_wide takes (P = 16 / element size / stride), or 0 where it
// does not apply: a window fixed in the code, dilation 1 and stride S along the last dim, P >= 2
// windows that start inside the vector before (padding < P * S) and end inside the vector after
// (kernel - padding - S < P * S), rows of whole vectors and x 16-byte aligned (`x_aligned`); where
// windows share no tap (kernel <= S), only calls of at least 2^17 work items (out_numel / P).
int pool_wide_outputs(const PoolGeometry& g, c10::ScalarType dtype, const PoolWindowParams& window, bool x_aligned,
                      int64_t out_numel);
// Whether the output rows (the last dim) are shorter than the pairs of a warp span (64 outputs):
// there a max pool with a fixed window takes one output a thread, not two.
bool pool_short_rows(const PoolGeometry& g);
// The kernel's work items: the outputs, `per_thread` of a row's along the last dim each.
int64_t pool_units(int64_t out_numel, const PoolGeometry& g, int per_thread);
// Dividers by the output dims, the last one's counted in work items.
PoolDividers pool_dividers(const PoolGeometry& g, int per_thread);
// A CTA's threads for `units` work items of a thread each: max_threads, halved (down to 64) while
// the grid would have fewer than 4 CTAs an SM.
int pool_cta_threads(int64_t units, int sm_count, int max_threads);
// Blocks for `units` work items, `items` a CTA (one trip each, capped at the grid's x limit: the
// kernel strides past it).
unsigned pool_grid(int64_t units, int items);

// "k3x3s2x2p1x1d1x1": a fixed window's values in the op's `rank` dims (kernel names, describe()).
std::string pool_window_tag(const PoolWindowParams& w, int rank);
// "tileops::PoolWindow<...>": a fixed window as the kernel's template argument.
std::string pool_window_expr(const PoolWindowParams& w);
// An optional int list of an op's view (stride=None), empty where absent.
inline c10::IntArrayRef or_empty(std::optional<c10::IntArrayRef> v) { return v.value_or(c10::IntArrayRef()); }

// MaxPool{1,2,3}dIndicesFwdOp and AdaptiveMaxPool2dIndicesFwdOp (src/kernels/pool/pool_max_indices_fwd.cuh,
// pool_max_indices.cpp): a thread an output on the value pools' walk (dividers, CTA size by
// pool_cta_threads); a kernel per dtype, rank, index type, adaptive or not and, where
// pool_small_window allows, window (in its code); else the window is a launch argument.
struct PoolIndicesProblem {
  c10::ScalarType dtype;
  int rank;
  int index_bits;  // 32 or 64, as pool_index_bits
  PoolWindowParams window{};  // pool_small_window's (all zero for adaptive bins and large windows)
  TILEOPS_IDENTITY(PoolIndicesProblem, dtype, rank, index_bits, window)
};

struct PoolIndicesSpec {
  c10::ScalarType dtype;
  int rank;
  bool adaptive;
  int index_bits;
  std::string arch;
  PoolWindowParams window{};  // nonzero: the window the kernel's code holds
  bool fixed_window() const { return window[0] != 0; }
  TILEOPS_IDENTITY(PoolIndicesSpec, dtype, rank, adaptive, index_bits, arch, window)
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

}  // namespace tileops::nvrtc

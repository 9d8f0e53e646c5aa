// The elementwise engine on the nvrtc target: every manifest entry with an `elementwise:` expression
// (tileops_generated/elementwise.h) is served by one family, whose kernels are the loops of
// src/kernels/elementwise/elementwise.cuh instantiated with an ew::Op (src/kernels/elementwise/op.cuh)
// of the entry's generated expression functor, the operand kinds and the compute type. A kernel's identity is that expression (the case a str
// param chose, for an entry with one expression per value), the dtypes and the
// path (contiguous with its vector width, or strided with its rank after collapsing dims), never
// the sizes: sizes and strides are launch arguments.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/tuning.h"
#include "tileops_generated/elementwise.h"

namespace tileops {
struct OpCall;
}

namespace tileops::nvrtc {

constexpr int kEwThreads = 256;  // strided and tiled loops
// The contiguous loop: small CTAs of two vector steps a thread reach copy speed and keep enough
// loads in flight for expressions bound by arithmetic (docs/PERF.md, "Elementwise engine").
constexpr int kEwContiguousThreads = 128;
constexpr int kEwUnroll = 2;
constexpr int kEwTile = 32;     // the tiled loop's square tile at one element a thread (elementwise.cuh tiled_fwd)
constexpr int kEwMaxRank = 6;  // collapsed ranks above this read contiguous copies (rare: 7+ broadcast dims)
// 32-bit indexing below this many elements: every index, offset and grid-stride step fits an int.
constexpr int64_t kEwInt32Limit = int64_t{1} << 30;

// The strides of one call, collapsed like TensorIterator: size-1 dims dropped, and neighbouring dims
// merged where every operand steps through them as through one.
// Small vectors: reading a call's layout allocates nothing.
struct EwLayout {
  c10::SmallVector<int64_t, 8> sizes;  // innermost last; empty for one element
  std::array<c10::SmallVector<int64_t, 8>, elementwise::kMaxInputs> strides;  // per input, in elements (0: broadcast)
  bool contiguous = true;                     // every input dense in the output's order or one element
  std::array<bool, elementwise::kMaxInputs> one{};  // input k is a single broadcast element
  int64_t numel = 1;
  int64_t max_offset = 0;  // largest element offset any input reaches
};
EwLayout ew_layout(c10::ArrayRef<c10::IntArrayRef> in_sizes, c10::ArrayRef<c10::IntArrayRef> in_strides,
                   c10::IntArrayRef out_sizes);

struct EwSpec {
  int op = -1;  // index into elementwise::kOps
  std::array<c10::ScalarType, elementwise::kMaxInputs> in{};
  c10::ScalarType out = c10::ScalarType::Undefined;
  c10::ScalarType compute = c10::ScalarType::Undefined;  // the expression's type (float for 16-bit floats)
  int rank = 0;      // 0: the contiguous path; else the strided path over this many collapsed dims
                     // (the tiled loop when an input is staged)
  int vec = 1;       // elements a thread step (strided path: > 1 when every inner stride is 0 or 1;
                     // tiled loop: 2 for even sizes)
  // Contiguous path: inputs read as one element; strided path with vec > 1: inner stride 0 (one
  // element held for a group of vec).
  std::array<bool, elementwise::kMaxInputs> one{};
  std::array<bool, elementwise::kMaxInputs> aligned{};  // vec > 1: the input's vec elements are one vector load
  // Strided path over 2 dims (the tiled loop): the input steps through the rows by 1 and is read
  // through a shared-memory tile.
  std::array<bool, elementwise::kMaxInputs> staged{};
  bool index64 = false;
  int variant = 0;  // the expression case the op's select param, or its optional inputs given, chose
                    // (elementwise::EwOp::case_exprs)
  // Contiguous path: steps of VEC a thread in flight, and the most threads a CTA.
  int unroll = kEwUnroll;
  int cta_threads = kEwContiguousThreads;
  std::string arch;

  TILEOPS_IDENTITY(EwSpec, op, in, out, compute, rank, vec, one, aligned, staged, index64, variant, unroll,
                   cta_threads, arch)
  std::string name() const;
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};
using EwProblem = EwSpec;  // the spec without the device

// The compute type of an op for these dtypes (the rule in manifests/elementwise.yaml's header).
c10::ScalarType ew_compute_dtype(const elementwise::EwOp& op, c10::ArrayRef<c10::ScalarType> in, c10::ScalarType out);
// The ew::Op type a spec instantiates its loop with (src/kernels/elementwise/op.cuh): the entry's
// expression functor (generated elementwise/exprs.cuh), the compute and output types, the params, and
// each input's type and kind.
std::string ew_op_type(const EwSpec& s);
// The params an entry's ew::Op holds (all but the select param), in order.
int ew_value_params(const elementwise::EwOp& op);
// Threads a CTA of the contiguous loop for `vecs` vector steps on `sms` SMs: max_threads, or fewer
// (down to a warp) when max_threads would leave SMs idle, so a small call's loads spread over more
// SMs instead of queueing on a few (each CTA still takes one chunk of threads x unroll steps).
int ew_contiguous_threads(int64_t vecs, int sms, int max_threads = kEwContiguousThreads, int unroll = kEwUnroll);
// The problem of a call of op `index` (tests build problems from plain values instead).
EwProblem ew_problem(int index, const OpCall& call);
// The spec of a problem on a device: its arch, and TILEOPS_TUNE's ew_unroll and ew_threads for the
// contiguous loop.
EwSpec plan_elementwise(const EwProblem& q, const DeviceFacts& dev, const Tuning& t = {});

}  // namespace tileops::nvrtc

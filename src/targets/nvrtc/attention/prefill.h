// Attention forward over whole sequences on the nvrtc target (pending), src/kernels/attention/prefill.cuh:
// MultiHeadAttentionFwdOp, GroupedQueryAttentionFwdOp and its sliding-window form (fixed-length
// requests), GroupedQueryAttentionSlidingWindowVarlenFwdOp and GroupedQueryAttentionPrefillFwdOp
// (packed requests), and GroupedQueryAttentionPrefillPagedWithKVCacheFwdOp (packed queries over a
// paged cache of q's dtype or float8_e4m3fn: optionally a kernel rotating q and the new keys, the
// attention, then a kernel appending the new keys and values to the cache). The problem is the dtype, the head dim, the layout and whether the kernel takes
// the call (16-byte aligned tensors; no FP8 scales; o in q's dtype); the spec adds the pipeline's
// stages and the arch. Masks, windows, scale and soft cap are launch arguments. Head dims other than
// 64 and 128 are declined to the backstops.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"

namespace tileops::nvrtc {

struct PrefillProblem {
  c10::ScalarType dtype;
  int64_t dim;
  bool varlen;  // packed requests
  bool ok;      // 16-byte aligned tensors; no FP8 q/k/v scales; o in q's dtype; a cache of q's dtype or FP8
  int paged = 0;  // prefill::kUnpaged, or how a paged cache is read: kPagedDirect, kPagedScaled, kPagedFp8
  bool rope = false;  // the paged call rotates q and the new keys first
  TILEOPS_IDENTITY(PrefillProblem, dtype, dim, varlen, ok, paged, rope)
};

struct PrefillSpec {
  c10::ScalarType dtype;
  int dim;     // 0: declined
  int stages;
  bool varlen;
  std::string arch;
  int paged = 0;
  bool rope = false;
  bool kernel() const { return dim > 0; }
  TILEOPS_IDENTITY(PrefillSpec, dtype, dim, stages, varlen, arch, paged, rope)
  // attention_prefill_fwd (paged: + attention_paged_append, + attention_paged_rope), or none
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

// prefill::kRows, kTile, kThreads and the paged modes of the kernel header
constexpr int kPrefillRows = 64, kPrefillTile = 64, kPrefillThreads = 128;
constexpr int kUnpaged = 0, kPagedDirect = 1, kPagedScaled = 2, kPagedFp8 = 3;
int prefill_smem_bytes(int dim, int stages);  // the query tile and each stage's K and V tiles
PrefillSpec prefill_plan(const PrefillProblem& q, const DeviceFacts& dev);

}  // namespace tileops::nvrtc

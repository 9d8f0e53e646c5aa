// Attention forward over whole sequences on the nvrtc target (pending): MultiHeadAttentionFwdOp and
// GroupedQueryAttentionFwdOp as src/kernels/attention/prefill.cuh. The problem is the dtype, the head
// dim, causality and whether every tensor allows 16-byte accesses; the spec adds the pipeline's
// stages and the arch. Head dims other than 64 and 128 are declined to the backstops.
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
  bool causal;
  bool aligned;  // q, k, v and o 16-byte aligned
  TILEOPS_IDENTITY(PrefillProblem, dtype, dim, causal, aligned)
};

struct PrefillSpec {
  c10::ScalarType dtype;
  int dim;     // 0: declined
  int stages;
  bool causal;
  std::string arch;
  bool kernel() const { return dim > 0; }
  TILEOPS_IDENTITY(PrefillSpec, dtype, dim, stages, causal, arch)
  std::vector<jit::KernelSource> sources() const;  // attention_prefill_fwd, or none
  std::string describe() const;
};

// prefill::kRows, kTile and kThreads of the kernel header
constexpr int kPrefillRows = 64, kPrefillTile = 64, kPrefillThreads = 128;
int prefill_smem_bytes(int dim, int stages);  // the query tile and each stage's K and V tiles
PrefillSpec prefill_plan(const PrefillProblem& q, const DeviceFacts& dev);

}  // namespace tileops::nvrtc

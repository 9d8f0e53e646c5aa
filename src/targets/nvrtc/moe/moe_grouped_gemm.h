// MoeGroupedGemmNopadFwdOp and MoeGateUpFwdOp on the nvrtc target (pending):
// src/kernels/moe/moe_grouped_gemm.cuh, one launch with the expert runs read on the device (capturable
// in a CUDA graph) for decode-sized calls; calls it does not take, and prefill-sized ones outside a
// capture, are declined to the backstops (cuBLASLt). The spec is the
// dtype, the gated activation (kMoeNoAct: none) and the pipeline's stages.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "kernels/common/op_ids.cuh"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/tuning.h"

namespace tileops::nvrtc {

constexpr int kMoeNoAct = -1;  // moe_gemm::kNoAct; gate-up: kActSilu or kActGelu (kernels/common/op_ids.cuh)

struct MoeGemmProblem {
  c10::ScalarType dtype;
  bool shape_ok;  // K % 8 == 0, 16-byte aligned a and b, at most kMoeGemmMaxExperts experts
  int act = kMoeNoAct;
  // rows an expert on average, rounded up to a power of two (a bounded set of problems), and whether
  // the stream is being captured (cuBLASLt's host read of the runs cannot be, so the one launch
  // serves any size there)
  int64_t per_expert = 1;
  bool capturing = false;
  TILEOPS_IDENTITY(MoeGemmProblem, dtype, shape_ok, act, per_expert, capturing)
};

struct MoeGemmSpec {
  c10::ScalarType dtype;
  int stages;  // 0: declined
  std::string arch;
  int act = kMoeNoAct;
  bool kernel() const { return stages > 0; }
  int out_cols() const { return act == kMoeNoAct ? 128 : 64; }  // c's columns a CTA
  TILEOPS_IDENTITY(MoeGemmSpec, dtype, stages, arch, act)
  std::vector<jit::KernelSource> sources() const;  // moe_grouped_gemm_fwd, or none
  std::string describe() const;
};

// moe_gemm::kBM, kBN, kThreads, kMaxExperts of the kernel header
constexpr int kMoeGemmRows = 64, kMoeGemmCols = 128, kMoeGemmThreads = 256, kMoeGemmMaxExperts = 1024;
constexpr int kMoeGemmStages = 4;
// The largest average of rows an expert measured faster on the one launch than on cuBLASLt's GEMM an
// expert (docs/PERF.md); at 128 cuBLASLt is twice as fast: the mma.sync tiles turn compute-bound
// while cuBLASLt still streams the weights (bench_moe.py --rows-per-expert sweeps between).
constexpr int64_t kMoeGemmMaxRowsPerExpert = 16;
int moe_gemm_smem_bytes(int stages);  // a's 64 and b's 128 rows of 128 bytes a stage
bool moe_gemm_shape_ok(int64_t k, int64_t experts, bool aligned);
MoeGemmSpec moe_gemm_plan(const MoeGemmProblem& q, const DeviceFacts& dev, const Tuning& tuning = {});

}  // namespace tileops::nvrtc

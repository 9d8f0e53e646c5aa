// GemmFp8FwdOp on the nvrtc target: src/kernels/gemm/fp8_gemm.cuh (sm_89+ e4m3 MMAs; per-block or
// mixed scales), the reference's ATen formula where it does not apply. Per-tensor scales on both
// operands are declined to the backstops (cuBLASLt: its wgmma kernels are faster there). The spec is
// the output and bias dtypes and the pipeline's stages.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"

namespace tileops::nvrtc {

struct Fp8GemmProblem {
  c10::ScalarType out;
  c10::ScalarType bias;  // Undefined: no bias
  bool shape_ok;  // K % 16 == 0, a and b 16-byte aligned
  bool per_tensor = false;  // both scales one value each
  TILEOPS_IDENTITY(Fp8GemmProblem, out, bias, shape_ok, per_tensor)
};

struct Fp8GemmSpec {
  c10::ScalarType out;
  c10::ScalarType bias;  // the bias pointer's type (the output's when there is none: the pointer is null)
  int stages;  // 0: served by ATen (or declined)
  std::string arch;
  bool declined = false;  // per-tensor scales: the backstops serve the call
  bool kernel() const { return stages > 0; }
  TILEOPS_IDENTITY(Fp8GemmSpec, out, bias, stages, arch, declined)
  std::vector<jit::KernelSource> sources() const;  // fp8_gemm_fwd, or none
  std::string describe() const;
};

constexpr int kFp8GemmStages = 4;
constexpr int kFp8GemmRows = 64, kFp8GemmCols = 128, kFp8GemmThreads = 256;  // fp8_gemm::kBM, kBN, kWarps * 32
int fp8_gemm_smem_bytes(int stages);  // a's 64 x 128 and b's 128 x 128 bytes a stage
Fp8GemmSpec fp8_gemm_plan(const Fp8GemmProblem& q, const DeviceFacts& dev);

}  // namespace tileops::nvrtc

// GemmW4A16FwdOp on the nvrtc target: src/kernels/gemm/w4a16_fwd.cuh for decode-sized activations
// (at most 64 rows); the rest declined to the backstops. The spec is the dtype, the activation
// rows' tiles of 8 (MT) and the warps that share a CTA's 16 weight rows along K.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"

namespace tileops::nvrtc {

struct W4A16Problem {
  c10::ScalarType dtype;
  int m_tiles;  // 8-row tiles of the activation the kernel takes; 0: not the kernel's shape
  TILEOPS_IDENTITY(W4A16Problem, dtype, m_tiles)
};

struct W4A16Spec {
  c10::ScalarType dtype;
  int m_tiles;  // 0: declined
  int warps;
  std::string arch;
  TILEOPS_IDENTITY(W4A16Spec, dtype, m_tiles, warps, arch)
  std::vector<jit::KernelSource> sources() const;  // none when m_tiles is 0
  std::string describe() const;
};

constexpr int kW4A16MaxRows = 64;
constexpr int kW4A16Warps = 4;

// The 8-row tiles (1, 2, 4 or 8) a call of m activation rows takes, or 0 where the kernel does not
// apply: more than 64 rows, K or group_size not a multiple of 32, x or the weight not 16-byte aligned,
// a dtype other than float16/bfloat16.
int w4a16_m_tiles(c10::ScalarType dtype, int64_t m, int64_t k, int64_t group_size, bool aligned);

// The kernel where the problem is its shape and the GPU has sm_80's MMA, else declined.
W4A16Spec w4a16_plan(const W4A16Problem& q, const DeviceFacts& dev);

// The weight dequantised to the activation's dtype (src/kernels/gemm/w4a16_dequant.cuh), what the
// cublaslt target's W4A16 GEMM runs first: it applies to K and group_size multiples of 8, a 4-byte
// aligned packed weight, float16/bfloat16 and sm_80's packed arithmetic.
bool w4a16_dequant_applies(c10::ScalarType dtype, int64_t k, int64_t group_size, bool aligned, int sm);
jit::KernelSource w4a16_dequant_source(c10::ScalarType dtype, const std::string& arch);
constexpr int kW4A16DequantThreads = 256;

}  // namespace tileops::nvrtc

// MultiHeadLatentAttentionDecodeWithKVCacheFwdOp on the nvrtc target (src/kernels/attention/decode_mla.cuh):
// tensor cores where the latent and rope dims fit it (f16/bf16, D a multiple of 16 up to 256, D + PE a
// multiple of 64, 16-byte aligned tensors, sm_80+), the reference's ATen formula elsewhere; the splits of
// the cache and their merge are decode_mma_fwd's.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"

namespace tileops::nvrtc {

struct MlaDecodeProblem {
  c10::ScalarType dtype;
  int64_t dim;     // D, the latent
  int64_t pe_dim;  // PE, the rope part
  bool aligned;    // every tensor 16-byte aligned
  TILEOPS_IDENTITY(MlaDecodeProblem, dtype, dim, pe_dim, aligned)
};

struct MlaDecodeSpec {
  c10::ScalarType dtype;
  int dim;     // 0: served by ATen
  int pe_dim;
  int stages;  // tiles in flight a warp, plus the one read
  std::string arch;
  bool kernel() const { return dim > 0; }
  TILEOPS_IDENTITY(MlaDecodeSpec, dtype, dim, pe_dim, stages, arch)
  std::vector<jit::KernelSource> sources() const;  // mla_decode_fwd and decode_merge, or none
  std::string describe() const;
};

// Dynamic shared memory of mla_decode_fwd: the pipeline (query tile and each warp's stages) or the
// warps' final states, whichever is larger.
int mla_decode_smem_bytes(int dim, int pe_dim, int stages);

MlaDecodeSpec mla_decode_plan(const MlaDecodeProblem& q, const DeviceFacts& dev);

}  // namespace tileops::nvrtc

// Decode attention on the nvrtc target (src/kernels/attention/decode.cuh): GQA decode over a
// contiguous or paged KV cache, and MHA decode (its query tokens read like GQA's group). The problem
// is the head's shape and the rows a KV head serves; the plan picks the lanes a token, the query rows
// a CTA and, per call, how many splits of the cache fill the GPU.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/tuning.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

// What a call asks for: the dtype, head dim D, the widest access D and the pointers allow, the query
// rows per KV head (GQA's group; MHA decode's query tokens) and whether the cache is paged.
struct DecodeProblem {
  c10::ScalarType dtype;
  int64_t dim;
  int vec;
  int64_t group;
  bool paged;
  TILEOPS_IDENTITY(DecodeProblem, dtype, dim, vec, group, paged)
};

// Two kernels: decode_mma_fwd (tensor cores: f16/bf16, D a multiple of 64 up to 256, 16-byte
// accesses, sm_80+, its shared memory within the device's) and decode_fwd (CUDA cores: the rest).
struct DecodeSpec {
  c10::ScalarType dtype;
  int vec;     // elements an access (16 bytes at most)
  int lanes;   // decode_fwd: lanes a token, a power of two, at most 32; 0 for decode_mma_fwd
  int nv;      // decode_fwd: accesses a lane holds of a token's D dims (lanes * nv * vec >= D)
  int g;       // query rows a CTA: a power of two, at most 8 (decode_fwd) or the MMA's 16
  int dim;     // decode_mma_fwd: D; 0 for decode_fwd
  int stages;  // decode_mma_fwd: tiles in flight a warp, plus the one read
  bool paged;
  std::string arch;
  bool mma() const { return dim > 0; }
  TILEOPS_IDENTITY(DecodeSpec, dtype, vec, lanes, nv, g, dim, stages, paged, arch)
  std::vector<jit::KernelSource> sources() const;  // decode_fwd or decode_mma_fwd, then decode_merge
  std::string describe() const;
};

// Bytes of dynamic shared memory decode_mma_fwd takes: the query tile and each warp's stages of K
// and V tiles.
int decode_mma_smem_bytes(int dim, int stages);

// How many splits of a request's cache a call of `ctas` CTAs takes (before splitting) on a GPU that
// holds `slots` CTAs at once: as many as fill one wave, each split at least 128 tokens, at most 128.
int decode_splits(int64_t ctas, int64_t max_tokens, int slots);

// The three ops read their tensors differently (GroupedQueryAttentionDecodeWithKVCacheFwdOp,
// its paged form, MultiHeadAttentionDecodeWithKVCacheFwdOp); plan and kernel are shared.
enum class DecodeOp { kGqa, kGqaPaged, kMha };

template <DecodeOp Op>
struct DecodeFamily {
  using Problem = DecodeProblem;
  using Spec = DecodeSpec;
  Problem problem(const OpCall& call) const;
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& tuning) const;
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const;
};

}  // namespace tileops::nvrtc

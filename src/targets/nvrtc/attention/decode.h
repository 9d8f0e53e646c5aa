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
  bool operator==(const DecodeProblem& o) const {
    return dtype == o.dtype && dim == o.dim && vec == o.vec && group == o.group && paged == o.paged;
  }
  size_t hash() const { return hash_words({static_cast<int64_t>(dtype), dim, vec, group, paged}); }
};

struct DecodeSpec {
  c10::ScalarType dtype;
  int vec;    // elements an access (16 bytes at most)
  int lanes;  // lanes a token: a power of two, at most 32
  int nv;     // accesses a lane holds of a token's D dims (lanes * nv * vec >= D)
  int g;      // query rows a CTA: a power of two, at most 8
  bool paged;
  std::string arch;
  bool operator==(const DecodeSpec& o) const {
    return dtype == o.dtype && vec == o.vec && lanes == o.lanes && nv == o.nv && g == o.g && paged == o.paged &&
           arch == o.arch;
  }
  size_t hash() const;
  std::vector<jit::KernelSource> sources() const;  // decode_fwd, then decode_merge
  std::string describe() const;
};

// How many splits of a request's cache a call takes: enough CTAs for `waves` per SM, each split at
// least `min_tokens` long, at most `max_splits`.
int decode_splits(int64_t ctas, int64_t max_tokens, int sm_count);

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

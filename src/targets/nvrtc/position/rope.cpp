// RopeNeoxCachedFwdOp, RopeNonNeoxCachedFwdOp and their flat forms on the nvrtc target (one kernel template,
// NEOX a template flag; the cache's element type, float32 or q's dtype, another template parameter).
#include "targets/nvrtc/position/rope.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <memory>

#include "targets/builtin.h"
#include "targets/position_rope_cached_args.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = rope_cached_args::op;
namespace flat = rope_cached_args::flat;

// What a RoPE call reads, from the 3-D entry ([t, heads, head_dim]) or the flat one
// ([t, heads * head_size], offsets); k and offsets are null when absent.
struct RopeArgs {
  const at::Tensor& positions;
  const at::Tensor& q;
  const at::Tensor* k;
  const at::Tensor& cache;
  const at::Tensor* offsets;
  int64_t head_dim, hq, hk;
};

RopeArgs read_args(const OpCall& call, bool flat_form) {
  if (flat_form) {
    const flat::View v(call);
    const int64_t hs = v.head_size();
    return {v.positions(), v.q(), v.k(), v.cos_sin_cache(), v.offsets(), hs, v.q().size(1) / hs,
            v.k() ? v.k()->size(1) / hs : 0};
  }
  const op::View v(call);
  return {v.positions(), v.q(), v.k(), v.cos_sin_cache(), nullptr, v.q().size(2), v.q().size(1),
          v.k() ? v.k()->size(1) : 0};
}

int align_bytes(const void* p) {
  const auto bits = reinterpret_cast<uintptr_t>(p);
  int bytes = 16;
  while (bytes > 1 && bits % bytes != 0) bytes /= 2;
  return bytes;
}

// Widest VEC the pointers allow: q/k accesses are VEC elements, cache loads min(VEC, 16 / its
// element size) elements, so a cache aligned to fewer than 16 bytes caps VEC at its alignment.
int alignment_vec(const RopeArgs& a, int elem) {
  const int qk = std::min(align_bytes(a.q.data_ptr()), a.k ? align_bytes(a.k->data_ptr()) : 16);
  int vec = std::max(1, qk / elem);
  const int cache_elem = static_cast<int>(a.cache.element_size());
  const int cache_elems = align_bytes(a.cache.data_ptr()) / cache_elem;
  if (cache_elems < 16 / cache_elem) vec = std::min(vec, std::max(1, cache_elems));
  return vec;
}

class RopeKernel final : public Kernel {
 public:
  RopeKernel(LoadedKernel k, RopeSpec p, bool flat_form) : k_(std::move(k)), p_(p), flat_(flat_form) {}
  void launch(const OpCall& call) const override {
    const RopeArgs a = read_args(call, flat_);
    const void* positions = a.positions.const_data_ptr();
    const void* offsets = a.offsets ? a.offsets->const_data_ptr() : nullptr;
    void* qp = a.q.mutable_data_ptr();
    void* kp = a.k ? a.k->mutable_data_ptr() : nullptr;  // key=None: no k heads
    const void* cache = a.cache.const_data_ptr();
    long long tokens = a.q.size(0);
    int hq = static_cast<int>(a.hq), hk = static_cast<int>(a.hk);
    long long max_pos = a.cache.size(0);
    const RopeLaunch shape = rope_launch_shape(p_, a.hq + a.hk);
    int slots = shape.slots, tpb = shape.tpb;
    void* args[] = {&positions, &qp, &kp, &cache, &tokens, &hq, &hk, &max_pos, &slots, &tpb};
    void* indexed_args[] = {&positions, &offsets, &qp, &kp, &cache, &tokens, &hq, &hk, &max_pos, &slots, &tpb};
    const long long grid = (tokens + tpb - 1) / tpb;
    TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many tokens (", tokens, ") for one launch");
    nvrtc::launch(k_, static_cast<unsigned>(grid), static_cast<unsigned>(shape.lanes * slots * tpb), 0,
                  p_.indexed() ? indexed_args : args);
  }

 private:
  LoadedKernel k_;
  RopeSpec p_;
  bool flat_;
};

struct RopeFamily {
  using Problem = RopeProblem;
  using Spec = RopeSpec;
  bool neox;
  bool flat_form;  // q and k as [t, heads * head_size], with optional per-token offsets

  Problem problem(const OpCall& call) const {
    const RopeArgs a = read_args(call, flat_form);
    TORCH_CHECK(a.hq + a.hk <= 0x7fffffffLL, call.op_name, ": too many heads");
    RopeProblem p{neox, a.q.scalar_type(), a.cache.scalar_type(), a.head_dim, a.cache.size(1),
                  alignment_vec(a, static_cast<int>(a.q.element_size()))};
    p.index_dtype = a.positions.scalar_type();
    p.offsets = a.offsets != nullptr;
    return p;
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const {
    RopeSpec s = plan_rope(q.dtype, q.head_dim, q.rot_dim, q.neox, q.max_vec, q.cache_dtype);
    s.index_dtype = q.index_dtype;
    s.offsets = q.offsets;
    s.arch = dev.arch;
    return s;
  }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo&) const {
    return std::make_shared<RopeKernel>(std::move(k[0]), s, flat_form);
  }
};

KernelBuilder rope_neox_cached_builder() { return spec_builder(RopeFamily{true, false}); }
KernelBuilder rope_non_neox_cached_builder() { return spec_builder(RopeFamily{false, false}); }
KernelBuilder rope_neox_cached_flat_builder() { return spec_builder(RopeFamily{true, true}); }
KernelBuilder rope_non_neox_cached_flat_builder() { return spec_builder(RopeFamily{false, true}); }

}  // namespace

RopeSpec plan_rope(c10::ScalarType dtype, int64_t head_dim, int64_t rot_dim, bool neox, int max_vec,
                   c10::ScalarType cache_dtype) {
  RopeSpec p{dtype, static_cast<int>(head_dim), static_cast<int>(rot_dim), 1, neox, cache_dtype};  // int64 positions, no offsets
  p.vec = std::max(1, std::min(16 / static_cast<int>(c10::elementSize(dtype)), max_vec));
  while (p.vec > 1 && ((rot_dim / 2) % rope_pairs(p) != 0 || head_dim % p.vec != 0)) p.vec /= 2;
  return p;
}

std::vector<jit::KernelSource> RopeSpec::sources() const { return {rope_source(*this, arch)}; }
std::string RopeSpec::describe() const {
  return std::string(neox ? "rope_neox_cached_fwd" : "rope_gptj_cached_fwd") + "(dtype=" + short_type_name(dtype) +
         ", head_dim=" + std::to_string(head_dim) + ", rot_dim=" + std::to_string(rot_dim) + ", vec=" +
         std::to_string(vec) + ", cache=" + short_type_name(cache_dtype) +
         (indexed() ? std::string(", positions=") + short_type_name(index_dtype) + (offsets ? "+offsets" : "") : "") +
         ")";
}

int rope_pairs(const RopeSpec& p) { return p.neox ? p.vec : std::max(1, p.vec / 2); }

std::string rope_name(const RopeSpec& p, const std::string& arch) {
  // int64 positions without offsets keep the name they had before the indexed kernel existed.
  const std::string index = p.indexed() ? std::string("__p") + short_type_name(p.index_dtype) + (p.offsets ? "_off" : "")
                                        : std::string();
  return std::string(p.neox ? "rope_neox_cached_fwd__" : "rope_gptj_cached_fwd__") + short_type_name(p.dtype) + "__c" +
         short_type_name(p.cache_dtype) + "__d" + std::to_string(p.head_dim) + "_r" + std::to_string(p.rot_dim) +
         "_v" + std::to_string(p.vec) + index + "__" + arch;
}

jit::KernelSource rope_source(const RopeSpec& p, const std::string& arch) {
  const std::string types = std::string(kernel_type_name(p.dtype)) + ", " + kernel_type_name(p.cache_dtype) + ", " +
                            (p.indexed() ? std::string(kernel_type_name(p.index_dtype)) + ", " : std::string());
  const std::string expr = std::string(p.indexed() ? "tileops::rope_indexed_fwd<" : "tileops::rope_fwd<") + types +
                           std::to_string(p.head_dim) + ", " + std::to_string(p.rot_dim) + ", " +
                           std::to_string(p.vec) + ", " + (p.neox ? "true" : "false") +
                           (p.indexed() ? (p.offsets ? ", true" : ", false") : "") + ">";
  return make_source(rope_name(p, arch), "position/rope_fwd.cuh", expr, arch);
}

RopeLaunch rope_launch_shape(const RopeSpec& p, int64_t heads) {
  // Mirrors RopeShape in rope_fwd.cuh: a lane per unit, at most 128 lanes (they loop beyond).
  const int units = p.rot_dim / 2 / rope_pairs(p);
  RopeLaunch s{};
  s.lanes = std::min(units, 128);
  s.slots = static_cast<int>(std::clamp<int64_t>(heads, 1, std::max(1, 256 / s.lanes)));
  s.tpb = std::max(1, 256 / (s.lanes * s.slots));  // few heads: several tokens a block
  return s;
}

TILEOPS_BUILTIN_KERNEL(nvrtc, RopeNeoxCachedFwdOp, rope_neox_cached_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, RopeNonNeoxCachedFwdOp, rope_non_neox_cached_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, RopeNeoxCachedFlatFwdOp, rope_neox_cached_flat_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, RopeNonNeoxCachedFlatFwdOp, rope_non_neox_cached_flat_builder);

}  // namespace tileops::nvrtc

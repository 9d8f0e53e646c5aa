// RopeNeoxFwdOp and RopeNonNeoxFwdOp on the nvrtc target (one kernel template, NEOX a template flag;
// the cache's element type, float32 or q's dtype, another template parameter).
#include "targets/nvrtc/position/rope.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::position_rope_neox_fwd;
namespace op2 = tileops::ops::position_rope_non_neox_fwd;
// Both RoPE entries are read through the Neox view: they share one argument order.
static_assert(int{op::q} == int{op2::q} && int{op::k} == int{op2::k} && int{op::positions} == int{op2::positions} &&
                  int{op::cos_sin_cache} == int{op2::cos_sin_cache},
              "both RoPE entries share one argument order");
using RopeView = op::View;



int align_bytes(const void* p) {
  const auto bits = reinterpret_cast<uintptr_t>(p);
  int bytes = 16;
  while (bytes > 1 && bits % bytes != 0) bytes /= 2;
  return bytes;
}

// Widest VEC the pointers allow: q/k accesses are VEC elements, cache loads min(VEC, 16 / its
// element size) elements, so a cache aligned to fewer than 16 bytes caps VEC at its alignment.
int alignment_vec(const RopeView& v, int elem) {
  const int qk = std::min(align_bytes(v.q().data_ptr()), align_bytes(v.k().data_ptr()));
  int vec = std::max(1, qk / elem);
  const at::Tensor& cache = v.cos_sin_cache();
  const int cache_elem = static_cast<int>(cache.element_size());
  const int cache_elems = align_bytes(cache.data_ptr()) / cache_elem;
  if (cache_elems < 16 / cache_elem) vec = std::min(vec, std::max(1, cache_elems));
  return vec;
}

class RopeKernel final : public Kernel {
 public:
  RopeKernel(LoadedKernel k, RopeSpec p) : k_(std::move(k)), p_(p) {}
  void launch(const OpCall& call) const override {
    const RopeView v(call);
    const at::Tensor& q = v.q();
    const at::Tensor& k = v.k();
    const void* positions = v.positions().const_data_ptr();
    void* qp = q.mutable_data_ptr();
    void* kp = k.mutable_data_ptr();
    const void* cache = v.cos_sin_cache().const_data_ptr();
    long long tokens = q.size(0);
    int hq = static_cast<int>(q.size(1)), hk = static_cast<int>(k.size(1));
    long long max_pos = v.cos_sin_cache().size(0);
    const RopeLaunch shape = rope_launch_shape(p_, static_cast<int64_t>(hq) + hk);
    int slots = shape.slots, tpb = shape.tpb;
    void* args[] = {&positions, &qp, &kp, &cache, &tokens, &hq, &hk, &max_pos, &slots, &tpb};
    const long long grid = (tokens + tpb - 1) / tpb;
    TORCH_CHECK(grid <= 0x7fffffffLL, call.op_name, ": too many tokens (", tokens, ") for one launch");
    nvrtc::launch(k_, static_cast<unsigned>(grid), static_cast<unsigned>(shape.lanes * slots * tpb), 0, args);
  }

 private:
  LoadedKernel k_;
  RopeSpec p_;
};

struct RopeFamily {
  using Problem = RopeProblem;
  using Spec = RopeSpec;
  bool neox;

  Problem problem(const OpCall& call) const {
    const RopeView v(call);
    const at::Tensor& q = v.q();
    TORCH_CHECK(q.size(1) + v.k().size(1) <= 0x7fffffffLL, call.op_name, ": too many heads");
    const at::Tensor& cache = v.cos_sin_cache();
    return RopeProblem{neox, q.scalar_type(), cache.scalar_type(), q.size(2), cache.size(1),
                       alignment_vec(v, static_cast<int>(q.element_size()))};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const {
    RopeSpec s = plan_rope(q.dtype, q.head_dim, q.rot_dim, q.neox, q.max_vec, q.cache_dtype);
    s.arch = dev.arch;
    return s;
  }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo&) const {
    return std::make_shared<RopeKernel>(std::move(k[0]), s);
  }
};

KernelBuilder rope_neox_builder() { return spec_builder(RopeFamily{true}); }
KernelBuilder rope_non_neox_builder() { return spec_builder(RopeFamily{false}); }

}  // namespace

RopeSpec plan_rope(c10::ScalarType dtype, int64_t head_dim, int64_t rot_dim, bool neox, int max_vec,
                   c10::ScalarType cache_dtype) {
  RopeSpec p{dtype, static_cast<int>(head_dim), static_cast<int>(rot_dim), 1, neox, cache_dtype, {}};
  p.vec = std::max(1, std::min(16 / static_cast<int>(c10::elementSize(dtype)), max_vec));
  while (p.vec > 1 && ((rot_dim / 2) % rope_pairs(p) != 0 || head_dim % p.vec != 0)) p.vec /= 2;
  return p;
}

bool RopeProblem::operator==(const RopeProblem& o) const {
  return neox == o.neox && dtype == o.dtype && cache_dtype == o.cache_dtype && head_dim == o.head_dim &&
         rot_dim == o.rot_dim && max_vec == o.max_vec;
}
size_t RopeProblem::hash() const {
  return hash_words({neox, static_cast<int64_t>(dtype), static_cast<int64_t>(cache_dtype), head_dim, rot_dim, max_vec});
}
bool RopeSpec::operator==(const RopeSpec& o) const {
  return dtype == o.dtype && head_dim == o.head_dim && rot_dim == o.rot_dim && vec == o.vec && neox == o.neox &&
         cache_dtype == o.cache_dtype && arch == o.arch;
}
size_t RopeSpec::hash() const {
  return hash_words({static_cast<int64_t>(dtype), head_dim, rot_dim, vec, neox, static_cast<int64_t>(cache_dtype)}) ^
         std::hash<std::string>()(arch);
}
std::vector<jit::KernelSource> RopeSpec::sources() const { return {rope_source(*this, arch)}; }
std::string RopeSpec::describe() const {
  return std::string(neox ? "rope_neox_fwd" : "rope_gptj_fwd") + "(dtype=" + short_type_name(dtype) +
         ", head_dim=" + std::to_string(head_dim) + ", rot_dim=" + std::to_string(rot_dim) + ", vec=" +
         std::to_string(vec) + ", cache=" + short_type_name(cache_dtype) + ")";
}

int rope_pairs(const RopeSpec& p) { return p.neox ? p.vec : std::max(1, p.vec / 2); }

std::string rope_name(const RopeSpec& p, const std::string& arch) {
  return std::string(p.neox ? "rope_neox_fwd__" : "rope_gptj_fwd__") + short_type_name(p.dtype) + "__c" +
         short_type_name(p.cache_dtype) + "__d" + std::to_string(p.head_dim) + "_r" + std::to_string(p.rot_dim) +
         "_v" + std::to_string(p.vec) + "__" + arch;
}

jit::KernelSource rope_source(const RopeSpec& p, const std::string& arch) {
  const std::string expr = std::string("tileops::rope_fwd<") + kernel_type_name(p.dtype) + ", " +
                           kernel_type_name(p.cache_dtype) + ", " + std::to_string(p.head_dim) + ", " +
                           std::to_string(p.rot_dim) + ", " + std::to_string(p.vec) + ", " +
                           (p.neox ? "true" : "false") + ">";
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

TILEOPS_BUILTIN_KERNEL(nvrtc, RopeNeoxFwdOp, rope_neox_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, RopeNonNeoxFwdOp, rope_non_neox_builder);

}  // namespace tileops::nvrtc

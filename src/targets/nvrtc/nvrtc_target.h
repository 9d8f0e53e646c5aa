// Shared machinery of the in-tree "nvrtc" target: device facts, CUBIN cache (memory, then disk,
// then NVRTC), per-device module loading and launches on the current stream.
#pragma once

#include <cuda.h>

#include <array>
#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/SmallVector.h>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/tuning.h"

namespace tileops {
struct OpCall;
}

namespace tileops::nvrtc {

// The nvrtc target serves CUDA tensors only (one check for every op).
void require_cuda(const OpCall& call);
// Empties the in-memory CUBIN cache (clear_kernel_caches(); the disk cache stays).
void clear_cubin_cache();

// A present device: its facts, and what launches need.
struct DeviceInfo : DeviceFacts {
  int index = -1;
  CUcontext context = nullptr;  // the device's primary context (what torch uses)
};
// Queried once per device; later calls are a table read.
const DeviceInfo& device_info(int device_index);

// A specialisation of a template kernel in src/kernels/<header>.
jit::KernelSource make_source(const std::string& name, const std::string& header, const std::string& name_expression,
                              const std::string& arch);

struct LoadedKernel {
  std::string name;
  CUfunction function = nullptr;
  CUmodule module = nullptr;
  int device = -1;
  CUcontext context = nullptr;
};
// Build phase: CUBIN from memory / disk cache / NVRTC, then loaded into the device's context.
LoadedKernel load(const jit::KernelSource& src, int device_index);

// Helpers every nvrtc op uses to name and plan its specialisations.
const char* kernel_type_name(c10::ScalarType t);  // storage type in kernel sources: "tileops::bf16"
const char* short_type_name(c10::ScalarType t);   // in specialisation names: "bf16"
int next_pow2(int64_t v);
// Mixes an integer into a hash (a field of a spec or a problem).
constexpr uint64_t kHashSeed = 1469598103934665603ull;
constexpr uint64_t hash_mix(uint64_t h, int64_t w) {
  return (h ^ static_cast<uint64_t>(w)) * 1099511628211ull + (h >> 29);
}

// A spec's fields are listed once (TILEOPS_IDENTITY) and == and hash() derive from that list, so a
// field cannot be compared yet left out of the hash, or the reverse.
template <class T>
concept HashableField = requires(const T& v) {
  { v.hash() } -> std::convertible_to<size_t>;
};
// hash_field folds one field into h: integers, enums and bools as words; strings by std::hash;
// arrays and vectors by length, then element by element; a nested spec by its hash().
template <class T>
  requires std::is_integral_v<T> || std::is_enum_v<T>
constexpr uint64_t hash_field(uint64_t h, const T& v) {
  return hash_mix(h, static_cast<int64_t>(v));
}
inline uint64_t hash_field(uint64_t h, const std::string& v) {
  return hash_mix(h, static_cast<int64_t>(std::hash<std::string>()(v)));
}
template <HashableField T>
uint64_t hash_field(uint64_t h, const T& v) {
  return hash_mix(h, static_cast<int64_t>(v.hash()));
}
template <class T, size_t N>
constexpr uint64_t hash_field(uint64_t h, const std::array<T, N>& v);
template <class T, class A>
uint64_t hash_field(uint64_t h, const std::vector<T, A>& v);
template <class T>
uint64_t hash_field(uint64_t h, const c10::SmallVectorImpl<T>& v);
template <class Range>
constexpr uint64_t hash_range(uint64_t h, const Range& v) {
  h = hash_mix(h, static_cast<int64_t>(std::size(v)));
  for (const auto& e : v) h = hash_field(h, e);
  return h;
}
template <class T, size_t N>
constexpr uint64_t hash_field(uint64_t h, const std::array<T, N>& v) {
  return hash_range(h, v);
}
template <class T, class A>
uint64_t hash_field(uint64_t h, const std::vector<T, A>& v) {
  return hash_range(h, v);
}
template <class T>
uint64_t hash_field(uint64_t h, const c10::SmallVectorImpl<T>& v) {
  return hash_range(h, v);
}
template <class... Fs>
size_t hash_identity(const std::tuple<Fs...>& t) {
  return static_cast<size_t>(
      std::apply([](const auto&... f) { uint64_t h = kHashSeed; ((h = hash_field(h, f)), ...); return h; }, t));
}
// In a spec or problem struct: std::tie (references: no copies, no allocation on the per-call lookup).
#define TILEOPS_IDENTITY(Type, ...)                         \
  auto identity() const { return std::tie(__VA_ARGS__); } \
  TILEOPS_IDENTITY_OPS(Type)
// For a struct that writes identity() itself (a field that counts only in some cases).
#define TILEOPS_IDENTITY_OPS(Type)                                            \
  bool operator==(const Type& o) const { return identity() == o.identity(); } \
  size_t hash() const { return ::tileops::nvrtc::hash_identity(identity()); }

// Widest access, in elements (a power of two of at most 16 bytes), that every pointer's alignment
// allows; null pointers are ignored.
int access_width(std::initializer_list<const void*> ptrs, int elem_size);
// Widest access (elements, at most 16 bytes) for rows of n elements, given the widest the pointers'
// alignment allows (max_vec): every row then starts on an access boundary.
int row_access_width(c10::ScalarType dtype, int64_t n, int max_vec);

// Call phase: one cuLaunchKernel on the current torch stream of the kernel's device.
void launch(const LoadedKernel& k, unsigned grid_x, unsigned block_x, unsigned smem_bytes, void** args);
// The same with 1-D thread-block clusters of cluster_x CTAs (sm_90+; grid_x a multiple of it).
void launch_cluster(const LoadedKernel& k, unsigned grid_x, unsigned block_x, unsigned cluster_x, unsigned smem_bytes,
                    void** args);
// A programmatic dependent launch (sm_90+): the kernel may be scheduled before the previous kernel on
// the stream ends, and must itself wait for it (griddepcontrol.wait) before touching memory; this
// hides the launch gap between two kernels of one op. Where cuLaunchKernelEx is missing, a plain launch.
void launch_dependent(const LoadedKernel& k, unsigned grid_x, unsigned block_x, unsigned smem_bytes, void** args);
// Whether a kernel may be launched that way: compute capability 9.0+, cuLaunchKernelEx present, and a
// driver of CUDA 12.3 or newer (CUDA graphs record such launches as programmatic edges from 12.3 on).
bool dependent_launch_supported(int cc_major, int driver_version, bool has_launch_ex);
// The same for a device (queries the driver's version once).
bool dependent_launch_supported(const DeviceInfo& dev);

// How one row of `vecs` accesses of `vec_bytes` each spreads over a thread-block cluster: the
// smallest cluster (2 CTAs up to max_cluster) whose CTAs hold at most cta_bytes each, about 4
// accesses a thread. False when a CTA's share would need more than 32 registers a thread (the row is
// too long for a cluster's registers). The family's table gives cta_bytes, max_cluster and per_thread
// (tuning keys cluster_cta_bytes, cluster_max and cluster_vpt override them there).
struct RowCluster {
  int cluster;     // CTAs per row
  int tpb;         // threads per CTA (power of two, 32..1024)
};
bool plan_row_cluster(int64_t vecs, int vec_bytes, int cta_bytes, int max_cluster, int per_thread, RowCluster& out);
// Clusters over 8 CTAs (the portable limit) need an opt-in per kernel (build phase).
void allow_large_clusters(const LoadedKernel& k, int cluster);
// Opts the kernel into `bytes` of dynamic shared memory (build phase; nothing for 0). Opting in
// under 48 KB too: static + dynamic may cross it.
void allow_dynamic_smem(const LoadedKernel& k, int bytes, const DeviceInfo& dev);

// Several implementations of one op on this target. Each declares what it applies to and which
// implementations it is preferred over; a problem gets the applicable implementation that no other
// applicable one is preferred over. Declaration order decides nothing, and a problem without
// exactly one such implementation is an error naming the candidates (the declarations miss a
// preference). `id`s are small distinct ints; preferred_over is a mask of ids.
template <class Problem>
struct Implementation {
  int id;
  const char* name;
  bool (*applies)(const Problem&);
  uint32_t preferred_over;
};

[[noreturn]] void throw_no_single_implementation(const char* op, const std::string& candidates);

template <class Problem>
const Implementation<Problem>& select_implementation(const char* op, const std::vector<Implementation<Problem>>& impls,
                                                     const Problem& p) {
  uint32_t applicable = 0;
  for (const auto& c : impls)
    if (c.applies(p)) applicable |= 1u << c.id;
  const Implementation<Problem>* chosen = nullptr;
  int winners = 0;
  for (const auto& c : impls) {
    if (!(applicable >> c.id & 1u)) continue;
    bool beaten = false;
    for (const auto& d : impls)
      if ((applicable >> d.id & 1u) && (d.preferred_over >> c.id & 1u)) beaten = true;
    if (!beaten) { chosen = &c; ++winners; }
  }
  if (winners != 1) {
    std::string names;
    for (const auto& c : impls)
      if (applicable >> c.id & 1u) names += std::string(names.empty() ? "" : ", ") + c.name;
    throw_no_single_implementation(op, names);
  }
  return *chosen;
}

}  // namespace tileops::nvrtc

// Thread-block clusters (sm_90+): a row too long for one SM is split across the CTAs of a cluster,
// which exchange per-CTA partial results through distributed shared memory (DSMEM) instead of a
// second kernel launch or a trip through global memory. Inline PTX, so NVRTC needs no toolkit headers.
#pragma once

namespace tileops {
namespace cluster {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "common/cluster.cuh needs sm_90 or newer (the host side only plans clusters there)"
#endif

// Rank of this CTA in its cluster (for a 1-D cluster of C CTAs: blockIdx.x % C).
__device__ __forceinline__ unsigned rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Every thread of every CTA of the cluster arrives, then waits: shared-memory writes made before
// the barrier are visible to the other CTAs after it (release/acquire are the defaults).
__device__ __forceinline__ void sync() {
  asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}

// Reads the float at `p` (an address in this CTA's shared memory) from the same variable of CTA
// `r` of the cluster.
__device__ __forceinline__ float load_remote(const float* p, unsigned r) {
  unsigned long long generic_to_shared;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(generic_to_shared) : "l"(p));
  const unsigned local = static_cast<unsigned>(generic_to_shared);
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(r));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}

}  // namespace cluster
}  // namespace tileops

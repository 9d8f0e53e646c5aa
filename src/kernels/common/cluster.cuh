// Thread-block clusters (sm_90+): a row too long for one SM is split across the CTAs of a cluster,
// which exchange per-CTA partial results through distributed shared memory (DSMEM) instead of a
// second kernel launch or a trip through global memory. Results are pushed (each CTA stores into
// its peers), never pulled, so no CTA has to stay alive for its readers. Inline PTX, so NVRTC
// needs no toolkit headers.
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

// The cluster barrier in two halves, so work overlaps it: every thread of every CTA arrives, and
// wait() returns once all have. arrive() releases this thread's earlier shared-memory writes (local
// or remote) and wait() acquires them. arrive_relaxed() orders nothing; it says "this CTA is
// running": after the matching wait(), every CTA of the cluster has started, so its shared memory
// may be written remotely (CUDA requires that before any DSMEM access).
__device__ __forceinline__ void arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
__device__ __forceinline__ void arrive() { asm volatile("barrier.cluster.arrive.aligned;" ::: "memory"); }
__device__ __forceinline__ void wait() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }

// Writes `v` to the float at `p` (an address in this CTA's shared memory) of CTA `r` of the cluster.
// Pushing results (instead of peers pulling them) lets a CTA exit without waiting for its readers.
__device__ __forceinline__ void store_remote(float* p, unsigned r, float v) {
  unsigned long long generic_to_shared;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(generic_to_shared) : "l"(p));
  const unsigned local = static_cast<unsigned>(generic_to_shared);
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(r));
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
}

}  // namespace cluster
}  // namespace tileops

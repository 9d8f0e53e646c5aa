// Bulk asynchronous copies global -> shared memory (sm_90+ "TMA" bulk copies without a tensor map),
// completed through a shared-memory mbarrier. A kernel stages a chunk of a row in shared memory with
// no registers held for the loads in flight, so more CTAs fit an SM than with a register-resident
// row. Inline PTX, so NVRTC needs no toolkit headers. Sizes and addresses: multiples of 16 bytes.
#pragma once

namespace tileops {
namespace bulk {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "common/bulk_copy.cuh needs sm_90 or newer"
#endif

__device__ __forceinline__ unsigned shared_address(const void* p) {
  unsigned long long a;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
  return static_cast<unsigned>(a);
}

// One thread initialises each barrier (expecting one arrival), then fence_init() makes the
// initialisation visible to the copy engine; a __syncthreads() must follow before other threads wait.
__device__ __forceinline__ void init(unsigned long long* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(bar)) : "memory");
}
__device__ __forceinline__ void fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// Copies `bytes` from global `src` to shared `dst`; `bar` completes (phase 0) when they have landed.
// The issuing thread's arrival announces the byte count first.
__device__ __forceinline__ void copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  const unsigned b = shared_address(bar);
  asm volatile("{ .reg .b64 state; mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1; }" ::"r"(b), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(b)
               : "memory");
}

// Waits until the barrier's phase `parity` has completed (the bytes of its copy are visible).
__device__ __forceinline__ void wait(unsigned long long* bar, unsigned parity) {
  const unsigned b = shared_address(bar);
  unsigned done;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(b), "r"(parity)
                 : "memory");
  } while (!done);
}

}  // namespace bulk
}  // namespace tileops

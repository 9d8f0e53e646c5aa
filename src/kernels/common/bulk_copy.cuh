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

// The issuing thread's arrival on `bar`, announcing the bytes its copies will deliver.
__device__ __forceinline__ void expect(unsigned long long* bar, unsigned bytes) {
  asm volatile("{ .reg .b64 state; mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1; }" ::"r"(
                   shared_address(bar)),
               "r"(bytes)
               : "memory");
}

// Copies `bytes` from global `src` to shared `dst`, counted against `bar` (see expect()).
__device__ __forceinline__ void copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(bar))
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

// Thread 0 of the CTA brings `count` 16-byte vectors from `src` to `dst` (and as many from `src2` to
// `dst2` when src2 is given) in PARTS parts of `part` vectors; part i completes landed[i] once, so
// consumers of the first part start while the rest is in flight. Barriers are initialised elsewhere
// (RowStager::init()).
template <int PARTS, typename V>
__device__ __forceinline__ void issue_parts(V* dst, const V* src, int count, int part, unsigned long long* landed,
                                            V* dst2, const V* src2) {
  static_assert(sizeof(V) == 16, "bulk copies move multiples of 16 bytes");
#pragma unroll
  for (int i = 0; i < PARTS; ++i) {
    const int lo = i * part, hi = lo + part < count ? lo + part : count;
    if (lo >= hi) break;
    const unsigned bytes = static_cast<unsigned>(hi - lo) * 16u;
    expect(&landed[i], src2 ? 2 * bytes : bytes);
    copy(dst + lo, src + lo, bytes, &landed[i]);
    if (src2) copy(dst2 + lo, src2 + lo, bytes, &landed[i]);
  }
}

// Rows of VECS vectors (STREAMS tensors a row: x, and the residual for the fused add) staged for a
// persistent CTA that walks rows blockIdx.x, + gridDim.x, ...: two slots, so the next row's bytes
// are in flight while the CTA works on the current one (a CTA that stages one row and exits has
// nothing in flight while it reduces and writes). Slot s holds rows 2k + s of the CTA's walk; its
// barriers complete one phase per use, so the k-th use waits on parity k & 1.
// Shared memory: `buf` of 2 * STREAMS * VECS vectors (STREAMS * VECS when the walk is one row:
// slot 1 is then never used), `landed` of 2 * parts() barriers.
template <typename V, int VECS, int TPB, int STREAMS>
struct RowStager {
  static_assert(sizeof(V) == 16, "bulk copies move multiples of 16 bytes");
  static constexpr int kParts = (VECS + TPB - 1) / TPB;  // part i: thread t's i-th vector
  V* buf;
  unsigned long long* landed;

  __device__ __forceinline__ V* row(int slot, int stream = 0) const { return buf + (slot * STREAMS + stream) * VECS; }
  // Thread 0, once, before the first issue(); a __syncthreads() must follow before anyone waits.
  // `slots`: 1 when the CTA never walks past its first row (slot 1 unused).
  __device__ __forceinline__ void init(int slots = 2) const {
#pragma unroll
    for (int i = 0; i < 2 * kParts; ++i)
      if (i < slots * kParts) bulk::init(&landed[i]);
    fence_init();
  }
  // Thread 0: `count` (<= VECS) vectors of the row at `src` (and `src2`, the second stream) into
  // `slot`. Every thread must have finished with the slot's previous row (a __syncthreads() since),
  // and have fenced its own generic writes to it (fence_generic_writes()) when it made any.
  __device__ __forceinline__ void issue(int slot, int count, const V* src, const V* src2 = nullptr) const {
    issue_parts<kParts>(row(slot, 0), src, count, TPB, &landed[slot * kParts], STREAMS > 1 ? row(slot, 1) : nullptr,
                        src2);
  }
  // f(i, c) for this thread's vectors of a row of `count` (<= VECS) vectors: c = i * TPB + thread, the
  // thread's vector in part i (EXACT: every thread has one in every part, no bounds check).
  template <bool EXACT, class F>
  __device__ __forceinline__ static void for_each(int count, F f) {
#pragma unroll
    for (int i = 0; i < kParts; ++i) {
      const int c = i * TPB + static_cast<int>(threadIdx.x);
      if (EXACT || c < count) f(i, c);
    }
  }
  // Waits until part `part` of the slot's `use`-th row has landed.
  __device__ __forceinline__ void wait(int slot, int part, unsigned use) const {
    bulk::wait(&landed[slot * kParts + part], use & 1u);
  }
};

// Orders this thread's earlier generic-proxy writes to shared memory before later bulk copies (the
// async proxy) into the same bytes: a staged row that was written in place is overwritten by the
// copy of a later row.
__device__ __forceinline__ void fence_generic_writes() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// A CTA's walk over rows row, row + step, ... < end with `stager`: thread 0 initialises the barriers
// and issues the first row's copy, every thread runs `prologue()` (loads that overlap the copy), and
// one __syncthreads() publishes the barriers. Each step, thread 0 first issues the next row's copy
// into the other slot (WALK; without it the CTA serves its first row only), then every thread runs
// body(slot, use, row), which waits on the slot's parts itself (stager.wait(slot, part, use)). Between
// steps every thread passes a __syncthreads(), after fencing its writes to the slot when
// WRITES_STAGE, so the slot and any reduction scratch are free before the next copy into it.
// issue(slot, row) is called by thread 0 only.
template <bool WALK, bool WRITES_STAGE, class Stager, class Issue, class Prologue, class Body>
__device__ __forceinline__ void walk_rows(const Stager& stager, long long row, long long end, long long step,
                                          Issue issue, Prologue prologue, Body body) {
  if (threadIdx.x == 0) {
    stager.init(WALK ? 2 : 1);
    if (row < end) issue(0, row);
  }
  prologue();
  __syncthreads();  // the barriers are initialised before anyone waits on them
  for (unsigned it = 0; row < end; row += step, ++it) {
    const int slot = static_cast<int>(it & 1u);
    const long long next = row + step;
    if (WALK && threadIdx.x == 0 && next < end) issue(slot ^ 1, next);
    body(slot, it >> 1, row);
    if (WALK && next < end) {  // the same on every thread
      if constexpr (WRITES_STAGE) fence_generic_writes();
      __syncthreads();
    }
  }
}

}  // namespace bulk
}  // namespace tileops

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

// A 16-byte read-only load issued where it is written: volatile asm keeps it ahead of the barrier
// waits that follow (also volatile asm), so it is in flight while the row's bulk copy lands.
// A plain load there is sunk by the compiler to its first use, after the waits.
template <class V>
__device__ __forceinline__ V load_before_waits(const V* p) {
  static_assert(sizeof(V) == 16, "one 16-byte vector");
  union {
    unsigned r[4];
    V v;
  } u;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(u.r[0]), "=r"(u.r[1]), "=r"(u.r[2]), "=r"(u.r[3])
               : "l"(p));
  return u.v;
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

// A row of VECS vectors (STREAMS tensors a row: x, and the residual for the fused add) staged in
// shared memory for a CTA: `buf` of STREAMS * VECS vectors, `landed` of parts() barriers (part i:
// thread t's i-th vector), each completing once.
template <typename V, int VECS, int TPB, int STREAMS>
struct RowStager {
  static_assert(sizeof(V) == 16, "bulk copies move multiples of 16 bytes");
  static constexpr int kParts = (VECS + TPB - 1) / TPB;
  V* buf;
  unsigned long long* landed;

  __device__ __forceinline__ V* row(int stream = 0) const { return buf + stream * VECS; }
  // Thread 0, before issue(); a __syncthreads() must follow before anyone waits.
  __device__ __forceinline__ void init() const {
#pragma unroll
    for (int i = 0; i < kParts; ++i) bulk::init(&landed[i]);
    fence_init();
  }
  // Thread 0: `count` (<= VECS) vectors of the row at `src` (and `src2`, the second stream).
  __device__ __forceinline__ void issue(int count, const V* src, const V* src2 = nullptr) const {
    issue_parts<kParts>(row(0), src, count, TPB, landed, STREAMS > 1 ? row(1) : nullptr, src2);
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
  // Waits until part `part` of the row has landed.
  __device__ __forceinline__ void wait(int part) const { bulk::wait(&landed[part], 0u); }
};

// One row a CTA: thread 0 initialises the barriers and issues the row's copy (issue(row)), every
// thread runs `prologue()` (loads that overlap the copy), one __syncthreads() publishes the
// barriers, then every thread runs body(row), which waits on the parts itself (stager.wait(part)).
template <class Stager, class Issue, class Prologue, class Body>
__device__ __forceinline__ void stage_row(const Stager& stager, long long row, long long rows, Issue issue,
                                          Prologue prologue, Body body) {
  if (threadIdx.x == 0) {
    stager.init();
    if (row < rows) issue(row);
  }
  prologue();
  __syncthreads();  // the barriers are initialised before anyone waits on them
  if (row < rows) body(row);
}

}  // namespace bulk
}  // namespace tileops

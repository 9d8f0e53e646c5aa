// Softmax / log-softmax forward, staged rows (sm_90+, 16-byte accesses): same semantics as
// softmax_fwd.cuh, one row per CTA, brought into shared memory by bulk asynchronous copies
// (common/bulk_copy.cuh) in parts of TPB vectors; one online (max, sum of exp) pass as parts land,
// then the output pass, both from shared memory. The register kernel stalls on its loads at low
// occupancy (docs/PERF.md): here a CTA holds no loads in flight and few registers, so more rows are
// in flight an SM.
// Grid: rows CTAs of TPB threads; dynamic shared memory N * sizeof(T) bytes.
#pragma once
#include "common/bulk_copy.cuh"
#include "reduction/softmax_fwd.cuh"

namespace tileops {

template <typename T, int N, int VEC, int TPB, bool LOG>
__global__ void __launch_bounds__(TPB) softmax_fwd_staged(const T* __restrict__ x, T* __restrict__ y, long long rows) {
  using namespace softmax_detail;
  using V = Vec<T, VEC>;
  constexpr int kVecs = N / VEC;
  using Stager = bulk::RowStager<V, kVecs, TPB, 1>;
  constexpr int kParts = Stager::kParts;
  constexpr bool kExact = kVecs % TPB == 0;
  extern __shared__ __align__(128) unsigned char staged_bytes[];
  __shared__ __align__(8) unsigned long long landed[kParts];
  __shared__ float2 scratch_pair[TPB > 32 ? TPB / 32 : 1];

  const Stager stager{reinterpret_cast<V*>(staged_bytes), landed};
  auto issue = [&](long long r) { stager.issue(kVecs, reinterpret_cast<const V*>(x + r * N)); };
  auto normalise = [&](long long row) {
    const V* stage = stager.row();
    V* yr = reinterpret_cast<V*>(y + row * N);

    float m = neg_inf(), s = 0.f;
    Stager::template for_each<kExact>(kVecs, [&](int i, int c) {
      stager.wait(i);
      online_add<T, VEC>(m, s, stage[c]);
    });
    const float2 ms = group_reduce<TPB>(make_float2(m, s), scratch_pair, CombineMaxSum{});
    const float M = ms.x, S = ms.y;
    const float inv_s = 1.f / S, log_s = LOG ? logf(S) : 0.f;
    Stager::template for_each<kExact>(kVecs, [&](int i, int c) { yr[c] = finish<T, VEC, LOG>(stage[c], M, inv_s, log_s); });
  };
  bulk::stage_row(stager, blockIdx.x, rows, issue, [] {}, normalise);
}

}  // namespace tileops

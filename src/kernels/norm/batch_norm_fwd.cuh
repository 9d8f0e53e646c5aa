// BatchNorm forward in training (BatchNormFwdOp, training=True): the batch statistics of each channel.
// x is read as InstanceNorm's rows (row n * C + c: sample n's channel c, HW contiguous elements), whose
// chunks group_norm_fwd_stats has reduced to moments in ws ((row * splits + split): count, mean, M2).
// batch_norm_fwd_stats merges, for channel c, the moments of rows c, C + c, 2C + c, ... in that order
// (Chan's rule, float32) into the batch mean and biased variance: stats[c] and stats[C + c], which the
// running-stats form of the group norm kernels then applies. With UPDATE it also moves the running
// stats in place, as torch does: running = (1 - momentum) * running + momentum * batch statistic, the
// variance unbiased (M2 / (count - 1)).
//
// batch_norm_fwd_channel does all of training in one launch when a channel fits in one CTA's registers:
// CTA b owns channels [b * CPB, (b + 1) * CPB), loads each channel's N * HW elements once (sample n's
// part: HW contiguous elements at (n * C + c) * HW), takes the mean and then M2 over the held values
// (two exact float32 passes), moves the running stats as above and writes y from the same registers.
#pragma once
#include "norm/group_norm_fwd.cuh"

namespace tileops {

// grid: ceil(C / TPB) CTAs of TPB threads, a thread a channel.
template <int TPB, bool UPDATE>
__global__ void __launch_bounds__(TPB)
batch_norm_fwd_stats(const void* __restrict__ ws, float* __restrict__ stats, float* __restrict__ running_mean,
                     float* __restrict__ running_var, long long samples, long long channels, int splits,
                     float momentum) {
  using namespace group_norm_detail;
  const long long c = static_cast<long long>(blockIdx.x) * TPB + threadIdx.x;
  if (c >= channels) return;
  const Moments* part = reinterpret_cast<const Moments*>(ws);
  Moments s{0.f, 0.f, 0.f};
  for (long long n = 0; n < samples; ++n)
    for (int k = 0; k < splits; ++k) s = merge(s, part[(n * channels + c) * splits + k]);
  stats[c] = s.mean;
  stats[channels + c] = s.m2 / s.n;  // the generated checks refused fewer than 2 values a channel
  if constexpr (UPDATE) {
    running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * s.mean;
    running_var[c] = (1.f - momentum) * running_var[c] + momentum * (s.m2 / (s.n - 1.f));
  }
}

namespace batch_norm_detail {

// The sum of v over the TPB / CPB threads of a channel (channel lane threadIdx.x % CPB), every one of
// them getting the same bits: a butterfly over the warp's lanes of the channel, then the warps' partial
// sums through `scratch` (TPB / 32 * CPB floats), added in one order by all.
template <int TPB, int CPB>
__device__ __forceinline__ float channel_sum(float v, float* scratch) {
#pragma unroll
  for (int offset = 16; offset >= CPB; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  constexpr int kWarps = TPB / 32;
  if constexpr (kWarps > 1) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane < CPB) scratch[warp * CPB + lane] = v;
    __syncthreads();
    v = 0.f;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) v += scratch[k * CPB + lane % CPB];
  }
  return v;
}

// Thread threadIdx.x's place in a CTA of CPB channels (channel lane threadIdx.x % CPB, the channel's
// vectors from threadIdx.x / CPB by TPB / CPB), and the CTA's scratch for two channel_sums.
template <int TPB, int CPB>
struct ChannelLane {
  static_assert(TPB % 32 == 0 && CPB >= 1 && CPB <= 32 && 32 % CPB == 0, "whole warps, CPB a power of two");
  static constexpr int kThreads = TPB / CPB;  // a channel's
  using Scratch = float[2][TPB / 32 * CPB];
  long long c, first;
  bool active;  // a missing channel's threads still join the sums
  __device__ __forceinline__ ChannelLane(long long group, long long channels)
      : c(group * CPB + threadIdx.x % CPB), first(threadIdx.x / CPB), active(c < channels) {}
};

}  // namespace batch_norm_detail

// grid: ceil(C / CPB) CTAs of TPB threads. Thread t serves channel lane t % CPB and the channel's vectors
// t / CPB + i * (TPB / CPB), i < CACHE (all of the channel's N * hv: the plan sized CACHE for it). CPB > 1
// only for 2-d x (hv == 1, VEC == 1: vector k is sample k): a warp then reads CPB adjacent channels of a
// sample, coalesced.
template <typename T, int VEC, int CPB, int TPB, int CACHE, bool UPDATE, bool HAS_W, bool HAS_B>
__global__ void __launch_bounds__(TPB)
batch_norm_fwd_channel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                       float* __restrict__ running_mean, float* __restrict__ running_var, T* __restrict__ y,
                       long long samples, long long channels, long long hv, float momentum, float eps) {
  using namespace group_norm_detail;
  using V = Vec<T, VEC>;
  using Lane = batch_norm_detail::ChannelLane<TPB, CPB>;
  constexpr int TPC = Lane::kThreads;
  static_assert(CPB == 1 || VEC == 1, "several channels a CTA only for 2-d x");
  __shared__ typename Lane::Scratch scratch;  // the two sums' partials: no barrier between them
  const Lane lane(blockIdx.x, channels);
  const long long c = lane.c, first = lane.first;
  const bool active = lane.active;
  const long long lv = samples * hv;  // the channel's vectors
  const V* xv = reinterpret_cast<const V*>(x);
  V* yv = reinterpret_cast<V*>(y);

  V cache[CACHE];
  {
    // Every load is issued before the first use; vector k is sample k / hv's vector k % hv.
    ChannelWalk<CPB == 1> at(first, TPC, hv);
#pragma unroll
    for (int i = 0; i < CACHE; ++i) {
      const long long k = first + static_cast<long long>(i) * TPC;
      if (active && k < lv) cache[i] = xv[CPB == 1 ? (at.c * channels + c) * hv + at.r : k * channels + c];
      at.step();
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < CACHE; ++i)
    if (active && first + static_cast<long long>(i) * TPC < lv)
#pragma unroll
      for (int e = 0; e < VEC; ++e) sum += to_float(cache[i].v[e]);
  const float count = static_cast<float>(lv * VEC);
  const float mean = batch_norm_detail::channel_sum<TPB, CPB>(sum, scratch[0]) / count;
  float sq = 0.f;
#pragma unroll
  for (int i = 0; i < CACHE; ++i)
    if (active && first + static_cast<long long>(i) * TPC < lv)
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float d = to_float(cache[i].v[e]) - mean;
        sq = fmaf(d, d, sq);
      }
  const float m2 = batch_norm_detail::channel_sum<TPB, CPB>(sq, scratch[1]);
  if (!active) return;
  if constexpr (UPDATE) {
    if (first == 0) {  // as batch_norm_fwd_stats: the same formulas on the same float32 statistics
      running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * mean;
      running_var[c] = (1.f - momentum) * running_var[c] + momentum * (m2 / (count - 1.f));
    }
  }
  float scale = rsqrtf(m2 / count + eps), shift = 0.f;
  if constexpr (HAS_W) scale *= to_float(w[c]);
  if constexpr (HAS_B) shift = to_float(b[c]);
  ChannelWalk<CPB == 1> at(first, TPC, hv);
#pragma unroll
  for (int i = 0; i < CACHE; ++i) {
    const long long k = first + static_cast<long long>(i) * TPC;
    if (k < lv) {
      V out;
#pragma unroll
      for (int e = 0; e < VEC; ++e) out.v[e] = from_float<T>(fmaf(to_float(cache[i].v[e]) - mean, scale, shift));
      yv[CPB == 1 ? (at.c * channels + c) * hv + at.r : k * channels + c] = out;
    }
    at.step();
  }
}

}  // namespace tileops

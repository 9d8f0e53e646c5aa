// BatchNorm backward in training (BatchNormBwdOp): dy and x are contiguous [N, C, HW] (HW: the product of
// the dims after C, 1 for 2-d x), mean and rstd the float32 batch statistics the forward saved. Over the
// M = N * HW values of channel c, with xh = (x - mean[c]) * rstd[c]:
//   dbias[c] = sum(dy), dweight[c] = sum(dy * xh) (float32 outputs),
//   dx = w[c] * rstd[c] * (dy - dbias[c] / M - xh * dweight[c] / M), rounded once to T.
// Vector k of a channel (VEC elements, VEC divides HW) is sample k / hv's vector k % hv, hv = HW / VEC.
//
// batch_norm_bwd_channel: one launch when a channel's dy and x fit in one CTA's registers: CTA b owns
// channels [b * CPB, (b + 1) * CPB), loads dy and x of each once, reduces both sums in the CTA, writes
// dweight and dbias and then dx from the held values.
// Larger channels: each channel's vectors are cut into `splits` chunks; batch_norm_bwd_partial writes
// each chunk's two sums to ws, batch_norm_bwd_reduce adds a channel's chunks in order into dbias and
// dweight, and batch_norm_bwd_dx reads dy and x again to write dx.
#pragma once
#include "norm/batch_norm_fwd.cuh"

namespace tileops {

namespace batch_norm_bwd_detail {

// What dx needs of a channel, from its two sums: the same expressions in every kernel, so the paths
// differ only in the order of the sums.
struct ChannelGrad {
  float mean, rstd, scale, mdb, mdw;
  __device__ __forceinline__ ChannelGrad(float w, float m, float r, float dbias, float dweight, float count)
      : mean(m), rstd(r), scale(w * r), mdb(dbias / count), mdw(dweight / count) {}
  __device__ __forceinline__ float dx(float dy, float x) const {
    const float xh = (x - mean) * rstd;
    return scale * (dy - mdb - xh * mdw);
  }
};

// Where vector k of channel c lies: 2-d x (CPB > 1, VEC == 1) has sample k's value at k * C + c.
template <int CPB>
__device__ __forceinline__ long long vector_index(const group_norm_detail::ChannelWalk<CPB == 1>& at, long long k,
                                                  long long c, long long channels, long long hv) {
  if constexpr (CPB == 1) return (at.c * channels + c) * hv + at.r;
  else return k * channels + c;
}

// Calls f(dy vector, x vector, index) for channel c's vectors k, k + TPC, ... below end (k: the
// thread's first), four loads of each input in flight.
template <int CPB, int TPC, typename V, typename F>
__device__ __forceinline__ void walk_chunk(const V* dyv, const V* xv, long long k, long long end, long long c,
                                           long long channels, long long hv, F&& f) {
  group_norm_detail::ChannelWalk<CPB == 1> at(k, TPC, hv);
  for (; k + 3 * TPC < end; k += 4 * TPC) {
    long long idx[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      idx[u] = vector_index<CPB>(at, k + u * TPC, c, channels, hv);
      at.step();
    }
    V g[4], v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      g[u] = dyv[idx[u]];
      v[u] = xv[idx[u]];
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) f(g[u], v[u], idx[u]);
  }
  for (; k < end; k += TPC) {
    const long long i = vector_index<CPB>(at, k, c, channels, hv);
    at.step();
    f(dyv[i], xv[i], i);
  }
}

// sum(dy) and sum(dy * xh) of a run of vectors, added to s0 and s1.
template <typename T, int VEC>
__device__ __forceinline__ void accumulate(const Vec<T, VEC>& dy, const Vec<T, VEC>& x, float mean, float rstd,
                                           float& s0, float& s1) {
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    const float g = to_float(dy.v[e]);
    s0 += g;
    s1 = fmaf(g, (to_float(x.v[e]) - mean) * rstd, s1);
  }
}

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> grad_vector(const Vec<T, VEC>& dy, const Vec<T, VEC>& x, const ChannelGrad& g) {
  Vec<T, VEC> out;
#pragma unroll
  for (int e = 0; e < VEC; ++e) out.v[e] = from_float<T>(g.dx(to_float(dy.v[e]), to_float(x.v[e])));
  return out;
}

}  // namespace batch_norm_bwd_detail

// grid: ceil(C / CPB) CTAs of TPB threads. Thread t serves channel lane t % CPB and the channel's vectors
// t / CPB + i * (TPB / CPB), i < CACHE (all of the channel's N * hv: the plan sized CACHE for it). CPB > 1
// only for 2-d x: a warp then reads CPB adjacent channels of a sample, coalesced.
template <typename T, int VEC, int CPB, int TPB, int CACHE>
__global__ void __launch_bounds__(TPB)
batch_norm_bwd_channel(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ w,
                       const float* __restrict__ mean, const float* __restrict__ rstd, T* __restrict__ dx,
                       float* __restrict__ dweight, float* __restrict__ dbias, long long samples, long long channels,
                       long long hv) {
  using namespace batch_norm_bwd_detail;
  using V = Vec<T, VEC>;
  using Lane = batch_norm_detail::ChannelLane<TPB, CPB>;
  constexpr int TPC = Lane::kThreads;
  static_assert(CPB == 1 || VEC == 1, "several channels a CTA only for 2-d x");
  __shared__ typename Lane::Scratch scratch;  // the two sums' partials: no barrier between them
  const Lane lane(blockIdx.x, channels);
  const long long c = lane.c, first = lane.first;
  const bool active = lane.active;
  const long long lv = samples * hv;
  const V* dyv = reinterpret_cast<const V*>(dy);
  const V* xv = reinterpret_cast<const V*>(x);
  V* dxv = reinterpret_cast<V*>(dx);

  V gcache[CACHE], xcache[CACHE];
  {
    // Every load is issued before the first use.
    group_norm_detail::ChannelWalk<CPB == 1> at(first, TPC, hv);
#pragma unroll
    for (int i = 0; i < CACHE; ++i) {
      const long long k = first + static_cast<long long>(i) * TPC;
      if (active && k < lv) {
        const long long at_k = vector_index<CPB>(at, k, c, channels, hv);
        gcache[i] = dyv[at_k];
        xcache[i] = xv[at_k];
      }
      at.step();
    }
  }
  const float m = active ? mean[c] : 0.f, r = active ? rstd[c] : 0.f;
  float s0 = 0.f, s1 = 0.f;
#pragma unroll
  for (int i = 0; i < CACHE; ++i)
    if (active && first + static_cast<long long>(i) * TPC < lv) accumulate(gcache[i], xcache[i], m, r, s0, s1);
  const float db = batch_norm_detail::channel_sum<TPB, CPB>(s0, scratch[0]);
  const float dw = batch_norm_detail::channel_sum<TPB, CPB>(s1, scratch[1]);
  if (!active) return;
  if (first == 0) {
    dbias[c] = db;
    dweight[c] = dw;
  }
  const ChannelGrad g(w[c], m, r, db, dw, static_cast<float>(lv * VEC));
  group_norm_detail::ChannelWalk<CPB == 1> at(first, TPC, hv);
#pragma unroll
  for (int i = 0; i < CACHE; ++i) {
    const long long k = first + static_cast<long long>(i) * TPC;
    if (k < lv) dxv[vector_index<CPB>(at, k, c, channels, hv)] = grad_vector(gcache[i], xcache[i], g);
    at.step();
  }
}

// grid: ceil(C / CPB) * splits CTAs of TPB threads; CTA b serves channel group b / splits and its chunk
// b % splits: vectors [s * chunk, min(lv, (s + 1) * chunk)) of each channel, lv = N * hv. Thread t walks
// channel lane t % CPB's vectors from t / CPB by TPB / CPB, four loads of each input in flight; the
// chunk's two sums go to ws[(c * splits + s) * 2 + {0, 1}].
template <typename T, int VEC, int CPB, int TPB>
__global__ void __launch_bounds__(TPB)
batch_norm_bwd_partial(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ mean,
                       const float* __restrict__ rstd, float* __restrict__ ws, long long channels, long long hv,
                       long long lv, long long chunk, int splits) {
  using namespace batch_norm_bwd_detail;
  using V = Vec<T, VEC>;
  using Lane = batch_norm_detail::ChannelLane<TPB, CPB>;
  constexpr int TPC = Lane::kThreads;
  static_assert(CPB == 1 || VEC == 1, "several channels a CTA only for 2-d x");
  __shared__ typename Lane::Scratch scratch;
  const long long s = blockIdx.x % splits;
  const Lane lane(blockIdx.x / splits, channels);
  const long long c = lane.c;
  const bool active = lane.active;
  const long long begin = s * chunk, end = begin + chunk < lv ? begin + chunk : lv;
  const V* dyv = reinterpret_cast<const V*>(dy);
  const V* xv = reinterpret_cast<const V*>(x);
  float s0 = 0.f, s1 = 0.f;
  if (active) {
    const float m = mean[c], r = rstd[c];
    walk_chunk<CPB, TPC>(dyv, xv, begin + threadIdx.x / CPB, end, c, channels, hv,
                         [&](const V& g, const V& v, long long) { accumulate(g, v, m, r, s0, s1); });
  }
  s0 = batch_norm_detail::channel_sum<TPB, CPB>(s0, scratch[0]);
  s1 = batch_norm_detail::channel_sum<TPB, CPB>(s1, scratch[1]);
  if (active && threadIdx.x < CPB) {
    ws[(c * splits + s) * 2] = s0;
    ws[(c * splits + s) * 2 + 1] = s1;
  }
}

// grid: ceil(C / TPB) CTAs of TPB threads, a thread a channel: its chunks' sums added in chunk order.
template <int TPB>
__global__ void __launch_bounds__(TPB)
batch_norm_bwd_reduce(const float* __restrict__ ws, float* __restrict__ dweight, float* __restrict__ dbias,
                      long long channels, int splits) {
  const long long c = static_cast<long long>(blockIdx.x) * TPB + threadIdx.x;
  if (c >= channels) return;
  float s0 = 0.f, s1 = 0.f;
  for (int s = 0; s < splits; ++s) {
    s0 += ws[(c * splits + s) * 2];
    s1 += ws[(c * splits + s) * 2 + 1];
  }
  dbias[c] = s0;
  dweight[c] = s1;
}

// batch_norm_bwd_partial's grid and walk, writing dx from dweight and dbias.
template <typename T, int VEC, int CPB, int TPB>
__global__ void __launch_bounds__(TPB)
batch_norm_bwd_dx(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ w,
                  const float* __restrict__ mean, const float* __restrict__ rstd, const float* __restrict__ dweight,
                  const float* __restrict__ dbias, T* __restrict__ dx, long long channels, long long hv, long long lv,
                  long long chunk, int splits) {
  using namespace batch_norm_bwd_detail;
  using V = Vec<T, VEC>;
  constexpr int TPC = TPB / CPB;
  const long long s = blockIdx.x % splits;
  const long long c = static_cast<long long>(blockIdx.x / splits) * CPB + threadIdx.x % CPB;
  if (c >= channels) return;
  const long long begin = s * chunk, end = begin + chunk < lv ? begin + chunk : lv;
  const V* dyv = reinterpret_cast<const V*>(dy);
  const V* xv = reinterpret_cast<const V*>(x);
  V* dxv = reinterpret_cast<V*>(dx);
  const ChannelGrad g(w[c], mean[c], rstd[c], dbias[c], dweight[c], static_cast<float>(lv * VEC));
  walk_chunk<CPB, TPC>(dyv, xv, begin + threadIdx.x / CPB, end, c, channels, hv,
                       [&](const V& a, const V& b, long long i) { dxv[i] = grad_vector(a, b, g); });
}

}  // namespace tileops

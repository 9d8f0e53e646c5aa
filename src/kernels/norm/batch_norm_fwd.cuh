// BatchNorm forward in training (BatchNormFwdOp, training=True): the batch statistics of each channel.
// x is read as InstanceNorm's rows (row n * C + c: sample n's channel c, HW contiguous elements), whose
// chunks group_norm_fwd_stats has reduced to moments in ws ((row * splits + split): count, mean, M2).
// batch_norm_fwd_stats merges, for channel c, the moments of rows c, C + c, 2C + c, ... in that order
// (Chan's rule, float32) into the batch mean and biased variance: stats[c] and stats[C + c], which the
// running-stats form of the group norm kernels then applies. With UPDATE it also moves the running
// stats in place, as torch does: running = (1 - momentum) * running + momentum * batch statistic, the
// variance unbiased (M2 / (count - 1)).
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

}  // namespace tileops

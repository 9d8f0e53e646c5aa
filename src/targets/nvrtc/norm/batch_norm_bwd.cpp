// BatchNormBwdOp on the nvrtc target (src/kernels/norm/batch_norm_bwd.cuh). A channel whose dy and x fit
// in one CTA's registers: batch_norm_bwd_channel, one launch, dy and x read once. Larger channels:
// batch_norm_bwd_partial over chunks of every channel, batch_norm_bwd_reduce a channel, then
// batch_norm_bwd_dx over the same chunks: dy and x read twice.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <string>

#include "targets/builtin.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {
namespace {

namespace op = tileops::ops::norm_batch_norm_bwd;

// The plans' limits. One launch: a thread holds about vecs_per_thread vectors of each of dy and x, more
// threads up to max_threads, then up to cache_regs registers of each in at most max_cache accesses (half
// the forward's, which holds x alone: up to 32 K 16-bit values a channel). Chunks: CTAs of
// chunk_threads, about chunk_waves times what the SMs hold at once, each thread at least
// min_chunk_vecs vectors.
struct BatchNormBwdTable {
  int vecs_per_thread = 4;
  int cache_regs = 16;  // registers of each input a thread: 4 accesses of 16 bytes
  int max_cache = 16;
  int max_threads = 1024;
  int max_channels = 32;  // channels a CTA for 2-d x: a warp's lanes along C
  int chunk_threads = 256;
  int chunk_waves = 2;
  int min_chunk_vecs = 8;
  int max_splits = 4096;
  int reduce_threads = 256;  // batch_norm_bwd_reduce: a thread a channel
};
constexpr BatchNormBwdTable kTable{};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct BatchNormBwdProblem {
  c10::ScalarType dtype;
  int64_t samples, channels;
  int64_t hw;   // elements a channel of a sample: the product of the dims after C (1 for 2-d x)
  int max_vec;  // widest access (elements) the alignment of dy, x and dx allows
  TILEOPS_IDENTITY(BatchNormBwdProblem, dtype, samples, channels, hw, max_vec)
};

struct BatchNormBwdSpec {
  bool channel;  // one launch: batch_norm_bwd_channel; else partial, reduce, dx
  c10::ScalarType dtype;
  int vec;    // elements an access; divides HW
  int cpb;    // channels a CTA (> 1 only for 2-d x)
  int tpb;    // threads a CTA
  int cache;  // channel: vectors of each input a thread holds
  std::string arch;
  TILEOPS_IDENTITY(BatchNormBwdSpec, channel, dtype, vec, cpb, tpb, cache, arch)

  std::vector<jit::KernelSource> sources() const {
    const auto n = [](int v) { return std::to_string(v); };
    const std::string type = kernel_type_name(dtype);
    const std::string shape = std::string(short_type_name(dtype)) + "__v" + n(vec) + "_c" + n(cpb) + "_t" + n(tpb);
    const std::string args = type + ", " + n(vec) + ", " + n(cpb) + ", " + n(tpb);
    if (channel)
      return {make_source("batch_norm_bwd_channel__" + shape + "_k" + n(cache) + "__" + arch, "norm/batch_norm_bwd.cuh",
                          "tileops::batch_norm_bwd_channel<" + args + ", " + n(cache) + ">", arch)};
    const std::string r = n(kTable.reduce_threads);
    return {make_source("batch_norm_bwd_partial__" + shape + "__" + arch, "norm/batch_norm_bwd.cuh",
                        "tileops::batch_norm_bwd_partial<" + args + ">", arch),
            make_source("batch_norm_bwd_reduce__t" + r + "__" + arch, "norm/batch_norm_bwd.cuh",
                        "tileops::batch_norm_bwd_reduce<" + r + ">", arch),
            make_source("batch_norm_bwd_dx__" + shape + "__" + arch, "norm/batch_norm_bwd.cuh",
                        "tileops::batch_norm_bwd_dx<" + args + ">", arch)};
  }
  std::string describe() const {
    return std::string("batch_norm_bwd(") + (channel ? "one launch" : "chunks, three launches") +
           ": dtype=" + short_type_name(dtype) + ", vec=" + std::to_string(vec) + ", channels a CTA=" +
           std::to_string(cpb) + ", threads=" + std::to_string(tpb) +
           (channel ? ", cache=" + std::to_string(cache) : std::string()) + ")";
  }
};

// Vectors a channel holds at the problem's access width, and that width.
int access_of(const BatchNormBwdProblem& q) { return q.hw == 1 ? 1 : row_access_width(q.dtype, q.hw, q.max_vec); }
int channels_a_cta(const BatchNormBwdProblem& q) {
  return q.hw == 1 ? next_pow2(std::clamp<int64_t>(q.channels, 1, kTable.max_channels)) : 1;
}

// The one-launch shape, or false when a channel's dy and x do not fit one CTA's registers. Pure.
bool plan_channel(const BatchNormBwdProblem& q, BatchNormBwdSpec& s) {
  const BatchNormBwdTable& t = kTable;
  const int64_t lv = q.samples * (q.hw / s.vec);  // vectors a channel (0 for an empty batch)
  const int reg_per_vec = std::max<int>(1, s.vec * static_cast<int>(c10::elementSize(q.dtype)) / 4);
  const int max_cache = std::min(t.max_cache, t.cache_regs / reg_per_vec);
  const int max_tpc = t.max_threads / s.cpb;  // threads a channel
  if (lv > static_cast<int64_t>(max_tpc) * max_cache) return false;
  const int min_tpc = std::max(1, 32 / s.cpb);  // whole warps
  int tpc = next_pow2(std::clamp<int64_t>(ceil_div(lv, t.vecs_per_thread), min_tpc, max_tpc));
  if (ceil_div(lv, tpc) > max_cache) tpc = next_pow2(ceil_div(lv, max_cache));
  s.tpb = tpc * s.cpb;
  s.cache = next_pow2(ceil_div(lv, tpc));
  return true;
}

BatchNormBwdSpec plan_batch_norm_bwd(const BatchNormBwdProblem& q, const DeviceFacts& dev) {
  BatchNormBwdSpec s{};
  s.dtype = q.dtype;
  s.arch = dev.arch;
  // 2-d x: a CTA's threads run along C, adjacent channels adjacent in memory; else a channel's N runs
  // of HW contiguous elements, read in accesses as wide as HW and the alignment allow.
  s.vec = access_of(q);
  s.cpb = channels_a_cta(q);
  s.channel = plan_channel(q, s);
  if (!s.channel) {
    s.tpb = kTable.chunk_threads;
    s.cache = 0;
  }
  return s;
}

// Chunks a channel is cut into on the three-launch path: enough CTAs to fill the device about
// chunk_waves times, never under min_chunk_vecs vectors a thread. Pure: the launch recomputes it.
int splits_of(const BatchNormBwdProblem& q, const BatchNormBwdSpec& s, const DeviceFacts& dev) {
  const BatchNormBwdTable& t = kTable;
  const int64_t lv = q.samples * (q.hw / s.vec);
  const int64_t groups = ceil_div(q.channels, s.cpb);
  const int64_t most = std::max<int64_t>(1, lv / (static_cast<int64_t>(s.tpb / s.cpb) * t.min_chunk_vecs));
  const int64_t want =
      static_cast<int64_t>(std::max(dev.sm_count, 1)) * std::max(1, dev.threads_per_sm / s.tpb) * t.chunk_waves;
  return static_cast<int>(std::clamp<int64_t>(ceil_div(want, std::max<int64_t>(groups, 1)), 1,
                                              std::min<int64_t>(most, t.max_splits)));
}

BatchNormBwdProblem problem_of(const op::View& v) {
  const at::Tensor& x = v.x();
  BatchNormBwdProblem q{};
  q.dtype = x.scalar_type();
  q.samples = x.size(0);
  q.channels = x.size(1);
  q.hw = 1;
  for (int64_t d = 2; d < x.dim(); ++d) q.hw *= x.size(d);
  q.max_vec = access_width({v.dy().const_data_ptr(), x.const_data_ptr(), v.dx().const_data_ptr()},
                           static_cast<int>(x.element_size()));
  return q;
}

class BatchNormBwdKernel final : public Kernel {
 public:
  BatchNormBwdKernel(std::vector<LoadedKernel> k, BatchNormBwdSpec s, DeviceFacts dev)
      : k_(std::move(k)), s_(std::move(s)), dev_(std::move(dev)) {}

  void launch(const OpCall& call) const override {
    const op::View v(call);
    const BatchNormBwdProblem q = problem_of(v);
    const void* dy = v.dy().const_data_ptr();
    const void* x = v.x().const_data_ptr();
    const void* w = v.weight().const_data_ptr();
    const void* mean = v.mean().const_data_ptr();
    const void* rstd = v.rstd().const_data_ptr();
    void* dx = v.dx().mutable_data_ptr();
    void* dw = v.dweight().mutable_data_ptr();
    void* db = v.dbias().mutable_data_ptr();
    long long samples = q.samples, channels = q.channels, hv = q.hw / s_.vec;
    if (hv == 0) {  // an empty spatial dim: no values, and the kernels' walk divides by hv
      samples = 0;
      hv = 1;
    }
    const long long groups = ceil_div(channels, s_.cpb);
    if (s_.channel) {
      TORCH_CHECK(groups <= INT_MAX, call.op_name, ": too many channels (", channels, ") for one launch");
      void* args[] = {&dy, &x, &w, &mean, &rstd, &dx, &dw, &db, &samples, &channels, &hv};
      nvrtc::launch(k_[0], static_cast<unsigned>(groups), static_cast<unsigned>(s_.tpb), 0, args);
      return;
    }
    int splits = splits_of(q, s_, dev_);
    long long lv = samples * hv, chunk = ceil_div(lv, splits);
    const long long grid = groups * splits;
    TORCH_CHECK(grid <= INT_MAX, call.op_name, ": too many channels (", channels, ") for one launch");
    const at::Tensor ws = at::empty({channels * splits * 2}, v.x().options().dtype(at::kFloat));
    void* wsp = ws.mutable_data_ptr();
    {
      void* args[] = {&dy, &x, &mean, &rstd, &wsp, &channels, &hv, &lv, &chunk, &splits};
      nvrtc::launch(k_[0], static_cast<unsigned>(grid), static_cast<unsigned>(s_.tpb), 0, args);
    }
    {
      const void* wsc = wsp;
      void* args[] = {&wsc, &dw, &db, &channels, &splits};
      const int t = kTable.reduce_threads;
      nvrtc::launch(k_[1], static_cast<unsigned>(ceil_div(channels, t)), static_cast<unsigned>(t), 0, args);
    }
    {
      const void* dwc = dw;
      const void* dbc = db;
      void* args[] = {&dy, &x, &w, &mean, &rstd, &dwc, &dbc, &dx, &channels, &hv, &lv, &chunk, &splits};
      nvrtc::launch(k_[2], static_cast<unsigned>(grid), static_cast<unsigned>(s_.tpb), 0, args);
    }
  }

 private:
  std::vector<LoadedKernel> k_;  // sources() order
  BatchNormBwdSpec s_;
  DeviceFacts dev_;
};

struct BatchNormBwdFamily {
  using Problem = BatchNormBwdProblem;
  using Spec = BatchNormBwdSpec;
  Problem problem(const OpCall& call) const { return problem_of(op::View(call)); }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning&) const { return plan_batch_norm_bwd(q, dev); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    return std::make_shared<BatchNormBwdKernel>(std::move(k), s, static_cast<const DeviceFacts&>(dev));
  }
};

KernelBuilder batch_norm_bwd_builder() { return spec_builder(BatchNormBwdFamily{}); }
TILEOPS_BUILTIN_KERNEL(nvrtc, BatchNormBwdOp, batch_norm_bwd_builder);

}  // namespace
}  // namespace tileops::nvrtc

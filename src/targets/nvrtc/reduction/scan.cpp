// The scans on the nvrtc target: geometry, problem, plan, launch and registration (scan.h).
#include "targets/nvrtc/reduction/scan.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <memory>

#include "targets/builtin.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/spec_builder.h"
#include "tileops_generated/ops.h"

namespace tileops::nvrtc {

const char* scan_op_name(ScanOp op) {
  switch (op) {
    case ScanOp::Sum: return "cumsum";
    case ScanOp::Prod: return "cumprod";
    case ScanOp::LogSumExp: return "logcumsumexp";
  }
  return "?";
}

int scan_acc_bytes(c10::ScalarType y_dtype) {
  const bool narrow_float = y_dtype == c10::kHalf || y_dtype == c10::kBFloat16 || y_dtype == c10::kFloat;
  return narrow_float ? 4 : 8;
}

ScanGeometry scan_geometry(c10::IntArrayRef sizes, int64_t dim) {
  ScanGeometry g;
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  if (ndim == 0) return g;
  const int64_t d = dim < 0 ? dim + ndim : dim;  // the generated checks refused an out-of-range dim
  for (int64_t k = 0; k < ndim; ++k) (k < d ? g.M : k == d ? g.N : g.I) *= sizes[k];
  return g;
}

namespace {

std::string type_part(const ScanSpec& s) {
  return std::string(short_type_name(s.x_dtype)) + "_" + short_type_name(s.y_dtype);
}

std::string types_of(const ScanSpec& s) {
  return std::string(kernel_type_name(s.x_dtype)) + ", " + kernel_type_name(s.y_dtype) + ", " +
         std::to_string(static_cast<int>(s.op)) + ", " + std::to_string(s.vec);
}

}  // namespace

std::string ScanSpec::name() const {
  const bool chained = impl == ScanImpl::kRows && split;
  std::string n = std::string("scan_") + (impl == ScanImpl::kRows ? (chained ? "rows_chained" : "rows") : "cols") +
                  "__" + scan_op_name(op) + "__" + type_part(*this) + "__v" + std::to_string(vec);
  if (chained) return n + "_t" + std::to_string(tpr) + "_c" + std::to_string(scan_chain_chunks(*this)) + "__" + arch;
  if (impl == ScanImpl::kRows) n += "_t" + std::to_string(tpr) + "_r" + std::to_string(rows);
  return n + (split ? "__split" : "") + "__" + arch;
}

std::vector<jit::KernelSource> ScanSpec::sources() const {
  if (impl == ScanImpl::kRows) {
    const std::string expr =
        split ? "tileops::scan_rows_chained<" + types_of(*this) + ", " + std::to_string(tpr) + ", " +
                    std::to_string(scan_chain_chunks(*this)) + ">"
              : "tileops::scan_rows<" + types_of(*this) + ", " + std::to_string(tpr) + ", " + std::to_string(rows) + ">";
    return {make_source(name(), "reduction/scan.cuh", expr, arch)};
  }
  const std::string expr = "tileops::scan_cols<" + types_of(*this) + ", " + (split ? "true>" : "false>");
  std::vector<jit::KernelSource> out{make_source(name(), "reduction/scan.cuh", expr, arch)};
  if (split) {
    out.push_back(make_source(std::string("scan_col_totals__") + scan_op_name(op) + "__" + type_part(*this) + "__v" +
                                  std::to_string(vec) + "__" + arch,
                              "reduction/scan.cuh", "tileops::scan_col_totals<" + types_of(*this) + ">", arch));
    out.push_back(make_source(std::string("scan_col_carries__") + scan_op_name(op) + "__" + short_type_name(y_dtype) +
                                  "__" + arch,
                              "reduction/scan.cuh",
                              std::string("tileops::scan_col_carries<") + kernel_type_name(y_dtype) + ", " +
                                  std::to_string(static_cast<int>(op)) + ">",
                              arch));
  }
  return out;
}

int scan_chain_chunks(const ScanSpec& s) {
  const int words = std::max(1, s.vec * scan_acc_bytes(s.y_dtype) / 4);  // accumulators a chunk holds a thread
  return std::clamp(kScanTable.chained_words / words, 1, kScanTable.chained_chunks);
}

int64_t scan_chain_tiles(const ScanSpec& s, int64_t N) {
  const int64_t per_tile = int64_t{s.tpr} * scan_chain_chunks(s);
  return std::max<int64_t>(1, (N / s.vec + per_tile - 1) / per_tile);
}

int64_t scan_chain_state_bytes(const ScanSpec& s, int64_t M, int64_t N) {
  const int64_t total = M * scan_chain_tiles(s, N);
  // flags (int, padded to 16 bytes), aggregates, inclusive prefixes, the counter: as scan_rows_chained reads them
  return (total * 4 + 15) / 16 * 16 + 2 * total * scan_acc_bytes(s.y_dtype) + 8;
}

std::string ScanSpec::describe() const {
  return std::string("scan_") + (impl == ScanImpl::kRows ? "rows" : "cols") + "(op=" + scan_op_name(op) + ", " +
         type_part(*this) + ", vec=" + std::to_string(vec) +
         (impl == ScanImpl::kRows ? ", tpr=" + std::to_string(tpr) + ", rows=" + std::to_string(rows) : "") +
         (split ? ", split" : "") + ")";
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int column_vec(const ScanProblem& q) {
  int vec = std::max(1, std::min(16 / static_cast<int>(c10::elementSize(q.x_dtype)), q.max_vec));
  while (vec > 1 && q.I % vec != 0) vec /= 2;
  return vec;
}

// The single-pass shape of a problem (the split is decided by scan_splits).
ScanSpec shape_of(const ScanProblem& q, const DeviceFacts& dev) {
  const ScanTable& T = kScanTable;
  ScanSpec s{};
  s.op = q.op;
  s.x_dtype = q.x_dtype;
  s.y_dtype = q.y_dtype;
  s.arch = dev.arch;
  s.tpr = 1;
  s.rows = 1;
  s.split = false;
  if (q.I == 1) {
    s.impl = ScanImpl::kRows;
    s.vec = row_access_width(q.x_dtype, q.N, q.max_vec);
    // A row in one chunk when it fits a CTA; longer rows loop over chunks with a carry.
    s.tpr = std::max(1, std::min(next_pow2(std::max<int64_t>(q.N / s.vec, 1)), T.max_tpr));
    s.rows = s.tpr < T.cta_threads ? T.cta_threads / s.tpr : 1;
  } else {
    s.impl = ScanImpl::kCols;
    s.vec = column_vec(q);
  }
  return s;
}

}  // namespace

int scan_splits(const ScanProblem& q, const DeviceFacts& dev) {
  const ScanTable& T = kScanTable;
  const ScanSpec s = shape_of(q, dev);
  const int64_t fill = static_cast<int64_t>(dev.sm_count) * T.fill_threads_per_sm;
  const int64_t full = static_cast<int64_t>(dev.sm_count) * dev.threads_per_sm;
  int64_t busy, most;
  if (s.impl == ScanImpl::kRows) {
    busy = q.M * s.tpr;
    most = q.N / s.vec / (static_cast<int64_t>(T.cta_threads) * T.min_split_chunks);  // a slice keeps its CTA busy
    if (busy >= fill || most < 2) return 1;
    return static_cast<int>(
        std::clamp<int64_t>(ceil_div(full, q.M * T.cta_threads), 2, std::min<int64_t>(most, T.max_splits)));
  }
  busy = q.M * (q.I / s.vec);
  most = q.N / T.min_split_rows;
  if (busy >= fill || most < 2) return 1;
  return static_cast<int>(std::clamp<int64_t>(ceil_div(full, busy), 2, std::min<int64_t>(most, T.max_splits)));
}

ScanSpec plan_scan(const ScanProblem& q, const DeviceFacts& dev, const Tuning&) {
  ScanSpec s = shape_of(q, dev);
  s.split = scan_splits(q, dev) > 1;
  if (s.split && s.impl == ScanImpl::kRows) {  // a CTA a slice: cta_threads threads, one row
    s.tpr = kScanTable.cta_threads;
    s.rows = 1;
  }
  return s;
}

namespace {

// What a scan reads from its call, through the op's generated view (every scan has x, y and dim).
struct ScanArgs {
  const at::Tensor& x;
  const at::Tensor& y;
  int64_t dim;
};
using ScanReader = ScanArgs (*)(const OpCall&);
template <class View>
ScanArgs scan_args(const OpCall& call) {
  const View v(call);
  return {v.x(), v.y(), v.dim()};
}

class ScanKernel final : public Kernel {
 public:
  ScanKernel(std::vector<LoadedKernel> k, ScanSpec s, ScanReader read, DeviceFacts dev)
      : k_(std::move(k)), s_(std::move(s)), read_(read), dev_(std::move(dev)) {}

  void launch(const OpCall& call) const override {
    const ScanArgs a = read_(call);
    const at::Tensor& x = a.x;
    const at::Tensor& y = a.y;
    const ScanGeometry g = scan_geometry(x.sizes(), a.dim);
    const void* xp = x.const_data_ptr();
    void* yp = y.mutable_data_ptr();
    long long M = g.M, N = g.N, I = g.I;
    const ScanProblem q{s_.op, s_.x_dtype, s_.y_dtype, g.M, g.N, g.I, s_.vec};
    at::Tensor ws;
    void* wsp = nullptr;
    if (s_.impl == ScanImpl::kRows) {
      if (s_.split) {
        // The look-back's flags and tile counter start at zero: one memset of the state.
        ws = at::zeros({scan_chain_state_bytes(s_, M, N)}, x.options().dtype(at::kByte));
        wsp = ws.mutable_data_ptr();
        long long tiles = scan_chain_tiles(s_, N);
        void* args[] = {&xp, &yp, &wsp, &M, &N, &tiles};
        nvrtc::launch(k_[0], static_cast<unsigned>(M * tiles), s_.tpr, 0, args);
        return;
      }
      void* args[] = {&xp, &yp, &M, &N};
      nvrtc::launch(k_[0], static_cast<unsigned>((M + s_.rows - 1) / s_.rows), s_.threads(), 0, args);
    } else {
      int splits = s_.split ? scan_splits(q, dev_) : 1;
      if (s_.split) {
        ws = at::empty({M * I * splits * scan_acc_bytes(s_.y_dtype)}, x.options().dtype(at::kByte));
        wsp = ws.mutable_data_ptr();
      }
      const void* wsc = wsp;
      const long long xblocks = (M * (I / s_.vec) + 255) / 256;
      if (s_.split) {
        void* targs[] = {&xp, &wsp, &M, &N, &I, &splits};
        nvrtc::launch(k_[1], static_cast<unsigned>(xblocks * splits), 256, 0, targs);
        long long cols = M * I;
        void* cargs[] = {&wsp, &cols, &splits};
        nvrtc::launch(k_[2], static_cast<unsigned>((cols + 255) / 256), 256, 0, cargs);
      }
      void* args[] = {&xp, &yp, &wsc, &M, &N, &I, &splits};
      nvrtc::launch(k_[0], static_cast<unsigned>(xblocks * splits), 256, 0, args);
    }
  }

 private:
  std::vector<LoadedKernel> k_;
  ScanSpec s_;
  ScanReader read_;
  DeviceFacts dev_;
};

struct ScanFamily {
  using Problem = ScanProblem;
  using Spec = ScanSpec;
  ScanOp op;
  ScanReader read;

  Problem problem(const OpCall& call) const {
    const ScanArgs a = read(call);
    const at::Tensor& x = a.x;
    const at::Tensor& y = a.y;
    const ScanGeometry g = scan_geometry(x.sizes(), a.dim);
    // y is stored in pieces of at most 16 bytes: a 16-byte-aligned y allows any width x allows.
    const int ysize = static_cast<int>(y.element_size());
    const int vx = access_width({x.const_data_ptr()}, static_cast<int>(x.element_size()));
    const int vy = access_width({y.const_data_ptr()}, ysize);
    const int max_vec = vy * ysize >= 16 ? vx : std::min(vx, vy);
    return Problem{op, x.scalar_type(), y.scalar_type(), g.M, g.N, g.I, max_vec};
  }
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& t) const { return plan_scan(q, dev, t); }
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const {
    return std::make_shared<ScanKernel>(std::move(k), s, read, static_cast<const DeviceFacts&>(dev));
  }
};

KernelBuilder cumsum_builder() {
  return spec_builder(ScanFamily{ScanOp::Sum, scan_args<tileops::ops::reduction_cumsum_fwd::View>});
}
KernelBuilder cumprod_builder() {
  return spec_builder(ScanFamily{ScanOp::Prod, scan_args<tileops::ops::reduction_cumprod_fwd::View>});
}
KernelBuilder log_cum_sum_exp_builder() {
  return spec_builder(ScanFamily{ScanOp::LogSumExp, scan_args<tileops::ops::reduction_log_cum_sum_exp_fwd::View>});
}

TILEOPS_BUILTIN_KERNEL(nvrtc, CumsumFwdOp, cumsum_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, CumprodFwdOp, cumprod_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, LogCumSumExpFwdOp, log_cum_sum_exp_builder);

}  // namespace
}  // namespace tileops::nvrtc

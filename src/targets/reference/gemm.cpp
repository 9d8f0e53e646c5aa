// The gemm family on the reference target: ATen's mm / bmm (cuBLAS on CUDA) written into the output;
// GEMM's transpose flags become transposed views, never copies. FP8 and 4-bit operands are widened to
// float32 with their scales, grouped GEMM's runs are read on the host (one sync) and checked before
// anything is written.
#include <ATen/core/Tensor.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <vector>

#include "targets/builtin.h"
#include "targets/reference/gemm.h"
#include "targets/reference/reference.h"
#include "tileops_generated/ops.h"

namespace tileops::reference {
namespace {

namespace gemm = tileops::ops::gemm_fwd;
namespace bmm = tileops::ops::gemm_bmm_fwd;
namespace fp8 = tileops::ops::gemm_fp8_fwd;
namespace bmm_fp8 = tileops::ops::gemm_bmm_fp8_fwd;
namespace bmm_fp8_kn = tileops::ops::gemm_bmm_fp8_kn_fwd;
namespace bmm_fp8_nk = tileops::ops::gemm_bmm_fp8_nk_fwd;
namespace grouped = tileops::ops::gemm_grouped_gemm_fwd;
namespace w4a16 = tileops::ops::gemm_w4_a16_fwd;

// A scale of 1 element, or one per row and 128-wide block of K, as a factor per element of x [R, K].
at::Tensor per_element(const at::Tensor& scale, int64_t rows, int64_t k) {
  const int64_t blocks = (k + 127) / 128;
  return scale.expand({rows, blocks}).repeat_interleave(128, 1).narrow(1, 0, k);
}

class GemmReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const gemm::View v(call);
    at::Tensor d = v.d();
    at::mm_out(d, v.trans_a() ? v.a().t() : v.a(), v.trans_b() ? v.b().t() : v.b());
  }
};

class BmmReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const bmm::View v(call);
    at::Tensor d = v.d();
    at::bmm_out(d, v.a(), v.b());
  }
};

class GemmFp8Reference final : public Kernel {
 public:
  void launch(const OpCall& call) const override { gemm_fp8_fwd_aten(call); }
};

// a [B, M, K] times b_kn [B, K, N] (a view of b in either storage order), float32 products and sums,
// the two 0-dim scales' product applied once, one rounding into d.
void bmm_fp8_into(const at::Tensor& a, const at::Tensor& b_kn, const at::Tensor& scale_a, const at::Tensor& scale_b,
                  at::Tensor d) {
  at::Tensor acc = at::bmm(a.to(at::kFloat), b_kn.to(at::kFloat)).mul_(scale_a.mul(scale_b));
  d.copy_(acc);
}

class BmmFp8Reference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const bmm_fp8::View v(call);
    bmm_fp8_into(v.a(), v.trans_b() ? v.b().transpose(1, 2) : v.b(), v.scale_a(), v.scale_b(), v.d());
  }
};

class BmmFp8KNReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const bmm_fp8_kn::View v(call);
    bmm_fp8_into(v.a(), v.b(), v.scale_a(), v.scale_b(), v.d());
  }
};

class BmmFp8NKReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const bmm_fp8_nk::View v(call);
    bmm_fp8_into(v.a(), v.b().transpose(1, 2), v.scale_a(), v.scale_b(), v.d());
  }
};

// NT / NN: each run of a's rows times its group's b[g] (b[g].T when stored [N, K]) in float32, the
// rows no group covers zeros, one rounding into the output. batch_padded_offsets is not read.
class GroupedGemmReference final : public Kernel {
 public:
  void launch(const OpCall& call) const override {
    const grouped::View v(call);
    const at::Tensor &a = v.a(), &b = v.b();
    at::Tensor out = v.output();
    at::Tensor acc = at::zeros(out.sizes(), out.options().dtype(at::kFloat));
    for (const GroupRun& r : group_runs(call.op_name, v.batch_sizes(), v.batch_offsets(), a.size(0))) {
      const at::Tensor w = b[r.group].to(at::kFloat);
      acc.narrow(0, r.first, r.rows).copy_(at::mm(a.narrow(0, r.first, r.rows).to(at::kFloat),
                                                  v.transpose_b() ? w.t() : w));
    }
    out.copy_(acc);
  }
};

// Unpacks uint8 [N, K / 2] into the 4-bit values [N, K] as float32: the low nibble is the even k,
// the high nibble the odd one.
at::Tensor unpack_nibbles(const at::Tensor& packed) {
  const at::Tensor low = packed.bitwise_and(15), high = packed.bitwise_right_shift(4);
  return at::stack({low, high}, -1).reshape({packed.size(0), 2 * packed.size(1)}).to(at::kFloat);
}

class GemmW4A16Reference final : public Kernel {
 public:
  void launch(const OpCall& call) const override { gemm_w4a16_fwd_aten(call); }
};

KernelBuilder gemm_fwd_builder() { return stateless_builder<GemmReference>("gemm_fwd (ATen)"); }
KernelBuilder bmm_fwd_builder() { return stateless_builder<BmmReference>("bmm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, GemmFwdOp, gemm_fwd_builder);
KernelBuilder gemm_fp8_fwd_builder() { return stateless_builder<GemmFp8Reference>("gemm_fp8_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, BmmFwdOp, bmm_fwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, GemmFp8FwdOp, gemm_fp8_fwd_builder);
KernelBuilder bmm_fp8_fwd_builder() { return stateless_builder<BmmFp8Reference>("bmm_fp8_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, BmmFp8FwdOp, bmm_fp8_fwd_builder);
KernelBuilder bmm_fp8_kn_fwd_builder() { return stateless_builder<BmmFp8KNReference>("bmm_fp8_kn_fwd (ATen)"); }
KernelBuilder bmm_fp8_nk_fwd_builder() { return stateless_builder<BmmFp8NKReference>("bmm_fp8_nk_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, BmmFp8KNFwdOp, bmm_fp8_kn_fwd_builder);
TILEOPS_BUILTIN_KERNEL(reference, BmmFp8NKFwdOp, bmm_fp8_nk_fwd_builder);
KernelBuilder grouped_gemm_fwd_builder() { return stateless_builder<GroupedGemmReference>("grouped_gemm_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, GroupedGemmFwdOp, grouped_gemm_fwd_builder);
KernelBuilder w4a16_fwd_builder() { return stateless_builder<GemmW4A16Reference>("gemm_w4a16_fwd (ATen)"); }
TILEOPS_BUILTIN_KERNEL(reference, GemmW4A16FwdOp, w4a16_fwd_builder);

}  // namespace

// Sorted by first row, an overlap is between neighbours.
std::vector<GroupRun> group_runs(const char* op, const at::Tensor& sizes, const at::Tensor& offsets, int64_t total) {
  const std::vector<int64_t> size = host_values(op, "batch_sizes", sizes), first = host_values(op, "batch_offsets", offsets);
  std::vector<GroupRun> runs;
  for (size_t g = 0; g < size.size(); ++g) {
    TORCH_CHECK_VALUE(size[g] >= 0, op, ": 'batch_sizes' must be non-negative, got ", size[g], " for group ", g);
    if (size[g] == 0) continue;
    TORCH_CHECK_VALUE(first[g] >= 0 && first[g] + size[g] <= total, op, ": group ", g, "'s rows [", first[g], ", ",
                      first[g] + size[g], ") ('batch_offsets', 'batch_sizes') must lie inside a's ", total, " rows");
    runs.push_back({static_cast<int64_t>(g), first[g], size[g]});
  }
  std::sort(runs.begin(), runs.end(), [](const GroupRun& x, const GroupRun& y) { return x.first < y.first; });
  for (size_t i = 1; i < runs.size(); ++i) {
    const GroupRun &lo = runs[i - 1], &hi = runs[i];
    TORCH_CHECK_VALUE(hi.first >= lo.first + lo.rows, op, ": groups ", lo.group, " and ", hi.group,
                      " share row ", hi.first, " ('batch_offsets', 'batch_sizes'); runs must not overlap");
  }
  return runs;
}

// Float32 throughout: per-tensor scales multiply the product, per-block ones the operands (the same
// sum of block products times their scales, up to float32 rounding); one rounding into d.
void gemm_fp8_fwd_aten(const OpCall& call) {
  const fp8::View v(call);
  const int64_t m = v.a().size(0), n = v.b().size(0), k = v.a().size(1);
  at::Tensor a = v.a().to(at::kFloat), b = v.b().to(at::kFloat), acc;
  if (v.scale_a().numel() == 1 && v.scale_b().numel() == 1) {
    acc = at::mm(a, b.t()).mul_(v.scale_a().reshape({}).mul(v.scale_b().reshape({})));
  } else {
    acc = at::mm(a.mul_(per_element(v.scale_a(), m, k)), b.mul_(per_element(v.scale_b(), n, k)).t());
  }
  if (const at::Tensor* bias = v.bias()) acc.add_(bias->to(at::kFloat));
  at::Tensor d = v.d();
  d.copy_(acc);
}

// w = (q - zero) * scale per group of K, the scale rounded to the activation's dtype first and the
// product rounded to it once (the 16-bit weight: exact in float32, then .to(dtype)); then
// activation @ w.T with float32 products and sums, one rounding into output.
at::Tensor w4a16_dequantized_weight(const OpCall& call) {
  const w4a16::View v(call);
  const at::ScalarType dtype = v.activation().scalar_type();
  const int64_t group = v.group_size();
  const at::Tensor scale = v.weight_scale().to(dtype).to(at::kFloat).repeat_interleave(group, 1);
  const at::Tensor zero = v.weight_zero().to(at::kFloat).repeat_interleave(group, 1);
  return unpack_nibbles(v.packed_weight()).sub_(zero).mul_(scale).to(dtype);
}

void gemm_w4a16_fwd_aten(const OpCall& call) {
  const w4a16::View v(call);
  at::Tensor out = v.output();
  out.copy_(at::mm(v.activation().to(at::kFloat), w4a16_dequantized_weight(call).to(at::kFloat).t()));
}

}  // namespace tileops::reference

// Row norm forward on the nvrtc target: RMSNormFwdOp, FusedAddRMSNormFwdOp, LayerNormFwdOp and the
// Gemma forms of the first two. One problem, one spec and one plan serve them all
// (src/kernels/norm/{rms,layer}_norm_fwd*.cuh).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/tuning.h"

namespace tileops::nvrtc {

enum class RowNormOp : uint8_t { kRmsNorm, kFusedAddRmsNorm, kLayerNorm };

// The output of the RMSNorm rows: y in x's dtype, or quantised (RMSNorm*QuantFwdOp) against a given
// per-tensor scale or a per-row one the kernel computes.
enum class RowNormQuant : uint8_t { kNone, kStatic, kDynamic };

// The implementations (src/kernels/norm/): which one serves a row is chosen by what each declares
// it applies to and which it is preferred over (row_norm_implementations()).
enum class RowNormImpl : int {
  kRegisterResident = 0,  // one CTA (or a slice of one) per row, the row in registers
  kCluster = 1,           // sm_90+, RMSNorm: a thread-block cluster per row, partial sums through DSMEM
  kStreaming = 2,         // any row: two passes, the second walking back through L2
  kStaged = 3,            // sm_90+, 16-byte accesses: one CTA per row, the row in shared memory
};

// What a call asks for. eps is a launch argument: it is not part of the problem.
struct RowNormProblem {
  RowNormOp op;
  c10::ScalarType dtype;
  int64_t n;            // row length (prod(normalized_shape))
  int max_vec;          // widest access (elements) the pointers' alignment allows
  bool weight;
  bool bias = false;    // LayerNorm only
  bool float_weight = false;  // a float32 weight beside a 16-bit row
  bool gemma = false;         // RMSNorm rows scaled by 1 + weight
  bool few_rows = false;      // the call has at most few_rows_max rows (row_norm_few_rows)
  RowNormQuant quant = RowNormQuant::kNone;
  c10::ScalarType qdtype = c10::ScalarType::Char;  // the quantised output: Char or Float8_e4m3fn
  // qdtype counts only when the output is quantised.
  auto identity() const {
    return std::tuple_cat(std::tie(op, dtype, n, max_vec, weight, bias, float_weight, gemma, few_rows, quant),
                          std::tuple(quant == RowNormQuant::kNone ? c10::ScalarType::Undefined : qdtype));
  }
  TILEOPS_IDENTITY_OPS(RowNormProblem)
};

// The kernel that serves a problem on a device.
struct RowNormSpec {
  RowNormOp op;
  RowNormImpl impl;
  c10::ScalarType dtype;
  int n;
  int vec;            // elements per access (16 bytes when the row and pointers allow)
  int tpr;            // threads per row (power of two, <= 1024); per CTA for clusters and staged rows
  int rows;           // rows per CTA
  int cluster;        // CTAs per row (kCluster)
  bool weight, bias;
  bool cache;         // row kept in registers between the passes (row kernels)
  bool staged;        // kStaged, or kCluster with the chunk in shared memory (bulk copies)
  bool one_pass;      // LayerNorm's staged rows: mean and variance from one pass of shifted sums
  bool float_weight;  // the weight is float32, the row 16-bit (register and streaming rows)
  bool gemma;         // scaled by 1 + weight (register and streaming rows)
  RowNormQuant quant; // register rows only
  c10::ScalarType qdtype;
  std::string arch;

  TILEOPS_IDENTITY(RowNormSpec, op, impl, dtype, n, vec, tpr, rows, cluster, weight, bias, cache, staged, one_pass,
                   float_weight, gemma, quant, qdtype, arch)
  int smem_bytes() const;  // dynamic shared memory of a launch
  std::string name() const;
  std::string template_expression() const;
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

// The measured thresholds of the row norm plans; the measurements are in docs/PERF.md, "Why the plans
// choose what they choose" (RMSNorm forward, Fused add + RMSNorm, LayerNorm forward, Staged rows).
struct RowNormTable {
  int vecs_per_thread = 4;                 // register rows: then 8, before a CTA wider than 256 (its barrier)
  int64_t few_rows_max = 128;              // about a CTA an SM; more rows fill the GPU without spreading
  int few_rows_vecs_per_thread = 2;        // thin enough that a float32 weight is loaded with x
  int64_t register_max_row_bytes = 65536;  // longer rows take the cluster or staged plans
  int cluster_cta_bytes = 32768;           // fewer, larger CTAs: 16 KB ones (16 a cluster) were slower
  int cluster_max = 8;
  int cluster_vpt = 4;                     // vectors a thread of a register cluster chunk
  int cluster_staged_vpt = 16;             // more loads in flight a thread while the chunk lands
  int64_t cluster_staged_max_smem = 131072;
  int rms_staged_min_row_bytes = 16384;    // 8 KB rows run the same in registers
  int rms_staged_max_row_bytes = 32768;    // longer rows were not measured staged
  int rms_staged_vpt = 2;                  // more vectors a thread gained nothing
  int fused_staged_min_row_bytes = 32768;  // 16 KB fused rows are faster in registers
  int fused_staged_vpt = 8;
  int ln_staged_min_row_bytes = 8192;      // the register kernel's 126 registers leave 2 CTAs an SM
  int ln_staged_vpt_short = 8;             // below 16 KB rows
  int ln_staged_vpt_long = 4;              // 16 KB rows and more (8 a thread was slower there)
  int64_t ln_one_pass_max_n = 16384;       // bf16 rows up to this take one shifted pass (precision bounds it)
};
constexpr RowNormTable kRowNormTable{};
// The table with the tuning's overrides (TILEOPS_TUNE, a developer tool): what the plans read.
RowNormTable row_norm_table(const Tuning& t);

// What an implementation's applicability reads: the problem, its access width, the device and tuning.
struct RowNormQuery {
  const RowNormProblem& q;
  int vec;
  const DeviceFacts& dev;
  const RowNormTable& T;
};
const std::vector<Implementation<RowNormQuery>>& row_norm_implementations();
const char* row_norm_impl_name(RowNormImpl impl);

// Whether a call's rows count as few (the problem's few_rows): the grid is short and each row's
// latency, not the SMs' throughput, bounds the call.
inline bool row_norm_few_rows(int64_t rows) { return rows <= kRowNormTable.few_rows_max; }

// plan(problem, device facts, tuning) -> spec: pure.
RowNormSpec plan_row_norm(const RowNormProblem& q, const DeviceFacts& dev, const Tuning& t = {});

// Staged rows shared with softmax: sm_90+ (bulk copies), 16-byte accesses, rows of min_row_bytes
// up to 64 KB; threads a CTA for about per_thread vectors each (both from the family's table).
bool staged_row_applies(c10::ScalarType dtype, int64_t n, int vec, const DeviceFacts& dev, int min_row_bytes);
int staged_row_threads(int64_t vecs, int per_thread);

}  // namespace tileops::nvrtc

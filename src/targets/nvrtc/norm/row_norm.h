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
  bool operator==(const RowNormProblem& o) const;
  size_t hash() const;
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

  bool operator==(const RowNormSpec& o) const;
  size_t hash() const;
  int smem_bytes() const;  // dynamic shared memory of a launch
  std::string name() const;
  std::string template_expression() const;
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

// The measured thresholds of the row norm plans; docs/PERF.md, "Row norms" for each number.
struct RowNormTable {
  int vecs_per_thread = 4;                 // register rows: 256-thread rows of 8 ran 0.97 of copy, 512 of 4 0.69
  int64_t few_rows_max = 128;              // about a CTA an SM; 512x8192 Gemma ran 6.6 us wider vs 5.6
  int few_rows_vecs_per_thread = 2;        // 1x3584 Gemma, float32 weight: 1.9 us vs 2.4 at 4 (weight prefetched)
  int64_t register_max_row_bytes = 65536;  // longer rows in one CTA ran below 0.7 of copy
  int cluster_cta_bytes = 32768;           // 64x131072: 16 KB / 16 CTAs slower than 32 KB / 8
  int cluster_max = 8;
  int cluster_staged_vpt = 16;             // 64x131072 bf16: 11.1 us vs 12.3 at 8
  int64_t cluster_staged_max_smem = 131072;
  int rms_staged_min_row_bytes = 16384;    // 2048x8192 bf16: 18.5 us staged vs 19.0 in registers
  int rms_staged_max_row_bytes = 32768;    // longer rows were not measured staged
  int rms_staged_vpt = 2;                  // 19.2 us at 8 a thread
  int fused_staged_min_row_bytes = 32768;  // 4096x16384: 134.9 us vs 139.2; 2048x8192 slower staged
  int fused_staged_vpt = 8;
  int ln_staged_min_row_bytes = 8192;      // 2048x4096 bf16: 10.4 us staged
  int ln_staged_vpt_short = 8;             // below 16 KB rows: 10.4 us vs 10.6 at 4
  int ln_staged_vpt_long = 4;              // 16 KB rows and more: 20.9 us vs 23.9 at 8
  int64_t ln_one_pass_max_n = 16384;       // bf16 only: 2048x4096 10.0 us vs 10.4 two passes
};
constexpr RowNormTable kRowNormTable{};

// What an implementation's applicability reads: the problem, its access width, the device and tuning.
struct RowNormQuery {
  const RowNormProblem& q;
  int vec;
  const DeviceFacts& dev;
  const Tuning& t;
};
const std::vector<Implementation<RowNormQuery>>& row_norm_implementations();
const char* row_norm_impl_name(RowNormImpl impl);

// Whether a call's rows count as few (the problem's few_rows): the grid is short and each row's
// latency, not the SMs' throughput, bounds the call.
inline bool row_norm_few_rows(int64_t rows) { return rows <= kRowNormTable.few_rows_max; }

// plan(problem, device facts, tuning) -> spec: pure.
RowNormSpec plan_row_norm(const RowNormProblem& q, const DeviceFacts& dev, const Tuning& t = {});

// Staged rows shared with softmax: sm_90+ (bulk copies), 16-byte accesses, rows of min_row_bytes
// (tuning: staged_min_row_bytes) up to 64 KB; threads a CTA for about per_thread vectors each.
bool staged_row_applies(c10::ScalarType dtype, int64_t n, int vec, const DeviceFacts& dev, int min_row_bytes,
                        const Tuning& t);
int staged_row_threads(int64_t vecs, int per_thread, const Tuning& t);

}  // namespace tileops::nvrtc

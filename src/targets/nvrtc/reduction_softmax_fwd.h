// SoftmaxFwdOp and LogSoftmaxFwdOp on the nvrtc target (one kernel source, a LOG flag): planning
// (which specialisation of src/kernels/reduction/softmax_fwd.cuh serves a row length) and builders.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

struct SoftmaxPlan {
  c10::ScalarType dtype;
  int n;        // row length (size of the reduced dim)
  int vec;      // elements per access (16 bytes when the row and pointers allow)
  bool log;     // log_softmax
  // One CTA (or a warp slice of one) per row: softmax_fwd.
  int tpr;      // threads per row (power of two, <= 1024)
  int rows;     // rows per CTA
  bool cache;   // row kept in registers (one read)
  // splits > 1: softmax_split_stats + softmax_split_apply, rows * splits CTAs of tpb threads each.
  int splits;
  int tpb;
};

// Long rows with few of them (lm-head logits) would leave most SMs idle with one CTA a row: those
// split each row over several CTAs. Decided per call from (n, rows), so it is part of the identity.
bool softmax_wants_split(int64_t n, int64_t rows);

// max_vec: the widest access the pointers' alignment allows (1..16/elem_size).
SoftmaxPlan plan_softmax(c10::ScalarType dtype, int64_t n, bool log, int max_vec, bool split);
std::string softmax_name(const SoftmaxPlan& p, const std::string& arch);
// One source (softmax_fwd) or two (split: stats, then apply).
std::vector<jit::KernelSource> softmax_sources(const SoftmaxPlan& p, const std::string& arch);
KernelBuilder softmax_fwd_builder();
KernelBuilder log_softmax_fwd_builder();

}  // namespace tileops::nvrtc

// The ids of the ops a kernel template takes as an int parameter, written once: the kernels compare
// against these names and the targets' enums (src/targets/nvrtc/) take their values from them.
// Plain C++ (no CUDA): the library's host code includes it too.
#pragma once

namespace tileops {

// activation/act.cuh (unary) and gated_fwd.cuh (every one; FatRelu and SwigluOai are gated only)
enum : int {
  kActRelu = 0, kActSilu = 1, kActGelu = 2, kActGeluTanh = 3, kActSigmoid = 4, kActQuickGelu = 5,
  kActFatRelu = 6, kActSwigluOai = 7,
};
// activation/gated_fwd.cuh: where a gated op's gate and up values sit in x's last dim
enum : int { kGateFirst = 0, kGateSecond = 1, kGateInterleaved = 2 };
// pool/pool_fwd.cuh
enum : int { kPoolAvg = 0, kPoolMax = 1 };
// reduction/scan.cuh
enum : int { kScanSum = 0, kScanProd = 1, kScanLogSumExp = 2 };
// reduction/reduce.cuh
enum : int {
  kReduceSum = 0, kReduceMean = 1, kReduceAmax = 2, kReduceAmin = 3, kReduceProd = 4, kReduceVar = 5,
  kReduceStd = 6, kReduceVarMean = 7, kReduceArgmax = 8, kReduceArgmin = 9, kReduceAll = 10, kReduceAny = 11,
  kReduceCountNonzero = 12, kReduceL1 = 13, kReduceL2 = 14, kReduceInf = 15, kReduceLogSumExp = 16,
};

}  // namespace tileops

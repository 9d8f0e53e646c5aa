// GroupedGemmFwdOp's runs of rows, read on the host from batch_sizes and batch_offsets: the reference
// target's kernel loops over them, and so does the cublaslt target's.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace tileops::reference {

struct GroupRun {
  int64_t group, first, rows;
};

// The groups' runs of rows [first, first + rows) in row order (size 0: no run, whatever the offset),
// each checked to be non-negative and inside a's `total` rows, no two sharing a row; refused by name
// while a CUDA graph is being captured (a host read).
std::vector<GroupRun> group_runs(const char* op, const at::Tensor& sizes, const at::Tensor& offsets, int64_t total);

}  // namespace tileops::reference

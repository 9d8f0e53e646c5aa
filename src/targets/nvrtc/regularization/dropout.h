// DropoutFwdOp and DropoutBwdOp on the nvrtc target (src/kernels/regularization/dropout_fwd.cuh): one
// kernel applies the seed's mask and scale to x (the forward's input, the backward's doutput). The
// problem is the dtype and the access width the pointers allow; sizes are launch arguments.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/device_facts.h"
#include "targets/nvrtc/nvrtc_target.h"
#include "targets/nvrtc/tuning.h"
#include "tileops/target.h"

namespace tileops::nvrtc {

struct DropoutProblem {
  c10::ScalarType dtype;
  int vec;  // elements an access (16 bytes at most), as x's and y's alignment allow
  TILEOPS_IDENTITY(DropoutProblem, dtype, vec)
};

struct DropoutSpec {
  c10::ScalarType dtype;
  int vec;
  std::string arch;
  TILEOPS_IDENTITY(DropoutSpec, dtype, vec, arch)
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

// kDropoutThreads of the kernel header.
constexpr int kDropoutCtaThreads = 256;

// What the kernel reads of a call of either op.
struct DropoutArgs {
  const at::Tensor& x;
  const at::Tensor& y;
  double p;
  int64_t seed;
  bool training;
};

struct DropoutFamily {
  using Problem = DropoutProblem;
  using Spec = DropoutSpec;
  DropoutArgs (*args)(const OpCall&);  // the op's view: DropoutFwdOp's input/output or DropoutBwdOp's
  Problem problem(const OpCall& call) const;
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& tuning) const;
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const;
};

}  // namespace tileops::nvrtc

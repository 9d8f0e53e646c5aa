// FP8QuantFwdOp on the nvrtc target: per-row float8_e4m3fn quantisation
// (src/kernels/quantization/fp8_quant_fwd.cuh). The problem is the row's shape in accesses; the plan
// picks the threads a row and whether the row stays in registers.
#pragma once

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

// What a call asks for: x's dtype, the access width (elements) and the accesses a row (n / vec).
struct Fp8QuantProblem {
  c10::ScalarType dtype;
  int vec;
  int64_t vecs;
  TILEOPS_IDENTITY(Fp8QuantProblem, dtype, vec, vecs)
};

struct Fp8QuantSpec {
  c10::ScalarType dtype;
  int vec;         // elements an access of x (16 bytes at most)
  int tpr;         // threads a row: a power of two, at most 32
  int per_thread;  // accesses a thread keeps in registers; 0: the row is read twice
  std::string arch;
  TILEOPS_IDENTITY(Fp8QuantSpec, dtype, vec, tpr, per_thread, arch)
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

// kFp8QuantThreads of the kernel header.
constexpr int kFp8QuantCtaThreads = 256;

struct Fp8QuantFamily {
  using Problem = Fp8QuantProblem;
  using Spec = Fp8QuantSpec;
  Problem problem(const OpCall& call) const;
  Spec plan(const Problem& q, const DeviceFacts& dev, const Tuning& tuning) const;
  std::shared_ptr<const Kernel> make(const Spec& s, std::vector<LoadedKernel> k, const DeviceInfo& dev) const;
};

}  // namespace tileops::nvrtc

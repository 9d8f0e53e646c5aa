// SinusoidalFwdOp on the nvrtc target: the specialisation of src/kernels/position/sinusoidal_fwd.cuh.
// dim and base are launch arguments; the spec is the dtype and the access width.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

#include "jit/nvrtc_compiler.h"
#include "targets/nvrtc/nvrtc_target.h"

namespace tileops::nvrtc {

struct SinusoidalProblem {
  c10::ScalarType dtype;
  int vec;  // elements a thread writes (even, divides dim)
  TILEOPS_IDENTITY(SinusoidalProblem, dtype, vec)
};

struct SinusoidalSpec {
  c10::ScalarType dtype;
  int vec;
  std::string arch;
  TILEOPS_IDENTITY(SinusoidalSpec, dtype, vec, arch)
  std::vector<jit::KernelSource> sources() const;
  std::string describe() const;
};

// vec: elements a thread writes (even, divides dim).
int sinusoidal_vec(c10::ScalarType dtype, int64_t dim, int max_vec);
jit::KernelSource sinusoidal_source(c10::ScalarType dtype, int vec, const std::string& arch);

}  // namespace tileops::nvrtc

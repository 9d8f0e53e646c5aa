// SinusoidalFwdOp on the nvrtc target: the specialisation of src/kernels/position/sinusoidal_fwd.cuh.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

#include "jit/nvrtc_compiler.h"

namespace tileops::nvrtc {

// vec: elements a thread writes (even, divides dim).
int sinusoidal_vec(c10::ScalarType dtype, int64_t dim, int max_vec);
jit::KernelSource sinusoidal_source(c10::ScalarType dtype, int vec, const std::string& arch);

}  // namespace tileops::nvrtc

// Self-registration of in-tree kernels: each per-op file in src/targets/<target>/ adds its builder
// with one line, and builtin_targets.cpp registers every in-tree target with what was added.
//
//   TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormFwdOp, rms_norm_fwd_builder);
#pragma once

#include <vector>

#include "tileops/target.h"

namespace tileops::registry {

struct BuiltinKernel {
  const char* target;       // "nvrtc" | "reference"
  const char* op;           // op class name
  KernelBuilder (*make)();  // called once, when the in-tree targets are registered
};

std::vector<BuiltinKernel>& builtin_kernels();

struct BuiltinKernelAdder {
  BuiltinKernelAdder(const char* target, const char* op, KernelBuilder (*make)()) {
    builtin_kernels().push_back({target, op, make});
  }
};

}  // namespace tileops::registry

#define TILEOPS_BUILTIN_KERNEL(target, op_class, make)                                                  \
  static const ::tileops::registry::BuiltinKernelAdder tileops_builtin_##target##_##op_class( \
      #target, #op_class, &(make))

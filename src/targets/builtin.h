// Self-registration of in-tree kernels: each per-op file in src/targets/<target>/ adds its builder
// with one line, and builtin_targets.cpp registers every in-tree target with what was added.
//
//   TILEOPS_BUILTIN_KERNEL(nvrtc, RMSNormFwdOp, rms_norm_fwd_builder);
//   TILEOPS_PENDING_KERNEL(nvrtc, BmmFwdOp, bmm_fwd_builder);   // served by the reference meanwhile
#pragma once

#include <vector>

#include "tileops/target.h"

namespace tileops::registry {

struct BuiltinKernel {
  const char* target;       // "nvrtc" | "cublaslt" | "reference"
  const char* op;           // op class name
  KernelBuilder (*make)();  // called once, when the in-tree targets are registered
  KernelStatus status;
};

std::vector<BuiltinKernel>& builtin_kernels();

struct BuiltinKernelAdder {
  BuiltinKernelAdder(const char* target, const char* op, KernelBuilder (*make)(),
                     KernelStatus status = KernelStatus::kVerified) {
    builtin_kernels().push_back({target, op, make, status});
  }
};

}  // namespace tileops::registry

#define TILEOPS_BUILTIN_KERNEL(target, op_class, make)                                                  \
  static const ::tileops::registry::BuiltinKernelAdder tileops_builtin_##target##_##op_class( \
      #target, #op_class, &(make))
// A kernel not yet verified on a GPU (KernelStatus::kPending): reachable with target="nvrtc" only;
// the GPU run that verifies it turns this line into TILEOPS_BUILTIN_KERNEL.
#define TILEOPS_PENDING_KERNEL(target, op_class, make)                                                  \
  static const ::tileops::registry::BuiltinKernelAdder tileops_builtin_##target##_##op_class( \
      #target, #op_class, &(make), ::tileops::KernelStatus::kPending)

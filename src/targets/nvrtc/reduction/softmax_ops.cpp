// SoftmaxFwdOp and LogSoftmaxFwdOp on the nvrtc target: one engine (softmax.h, softmax_plan.cpp,
// softmax_launch.cpp), LogSoftmaxFwdOp its kernels with LOG=true.
#include "targets/builtin.h"
#include "targets/nvrtc/reduction/softmax_launch.h"

namespace tileops::nvrtc {
namespace {
KernelBuilder softmax_fwd_builder() { return softmax_builder(false); }
KernelBuilder log_softmax_fwd_builder() { return softmax_builder(true); }
TILEOPS_BUILTIN_KERNEL(nvrtc, SoftmaxFwdOp, softmax_fwd_builder);
TILEOPS_BUILTIN_KERNEL(nvrtc, LogSoftmaxFwdOp, log_softmax_fwd_builder);
}  // namespace
}  // namespace tileops::nvrtc

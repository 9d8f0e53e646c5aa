// LogSoftmaxFwdOp on the nvrtc target: the softmax kernels with LOG=true (softmax.h, softmax_launch.h).
#include "targets/builtin.h"
#include "targets/nvrtc/reduction/softmax_launch.h"

namespace tileops::nvrtc {
namespace {
KernelBuilder log_softmax_fwd_builder() { return softmax_builder(true); }
TILEOPS_BUILTIN_KERNEL(nvrtc, LogSoftmaxFwdOp, log_softmax_fwd_builder);
}  // namespace
}  // namespace tileops::nvrtc

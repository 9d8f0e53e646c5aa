// SoftmaxFwdOp on the nvrtc target (softmax.h, softmax_launch.h).
#include "targets/builtin.h"
#include "targets/nvrtc/reduction/softmax_launch.h"

namespace tileops::nvrtc {
namespace {
KernelBuilder softmax_fwd_builder() { return softmax_builder(false); }
TILEOPS_BUILTIN_KERNEL(nvrtc, SoftmaxFwdOp, softmax_fwd_builder);
}  // namespace
}  // namespace tileops::nvrtc

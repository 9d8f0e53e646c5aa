// LogSoftmaxFwdOp on the nvrtc target: the softmax kernels with LOG=true (planning, launcher and
// the known cost of a non-last dim: src/targets/nvrtc/reduction_softmax_fwd.cpp).
#include "targets/builtin.h"
#include "targets/nvrtc/reduction_softmax_fwd.h"

namespace tileops::nvrtc {

TILEOPS_BUILTIN_KERNEL(nvrtc, LogSoftmaxFwdOp, log_softmax_fwd_builder);

}  // namespace tileops::nvrtc

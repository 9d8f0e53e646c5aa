// What reference.h declares out of line: the host reads of inputs, refused during CUDA graph capture.
#include <c10/util/Exception.h>

#include "boundary/runtime.h"
#include "targets/reference/reference.h"

namespace tileops::reference {

void refuse_host_read_during_capture(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(!runtime::stream_is_capturing(t.device()), op, ": the reference target reads '", name,
              "' on the host (a device sync) and the current stream is being captured into a CUDA graph, which "
              "forbids it; this op has no CUDA implementation that captures yet: call it outside the capture");
}

}  // namespace tileops::reference

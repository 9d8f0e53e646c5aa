// Programmatic dependent launch (sm_90+; host side: launch_dependent in
// src/targets/nvrtc/nvrtc_target.h). A kernel launched that way may start while the kernel before it
// on the stream still runs, and waits with wait_for_prior_grid() before it touches memory; the
// kernel before it lets it be scheduled early with allow_dependent_launch(). Both are no-ops before
// sm_90 and for kernels launched the ordinary way.
#pragma once

namespace tileops {

// Lets the next kernel of the stream, if launched as a programmatic dependent, be scheduled now
// (it still waits for this grid's completion and memory in wait_for_prior_grid).
__device__ __forceinline__ void allow_dependent_launch() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits until the grids this one depends on have completed and their writes are visible.
__device__ __forceinline__ void wait_for_prior_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace tileops

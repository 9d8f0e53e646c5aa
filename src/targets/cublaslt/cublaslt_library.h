// cuBLASLt, opened with dlopen at first use (libtileops.so has no link-time dependency on it, so the
// library loads and serves CPU calls where CUDA is absent). The copy torch already loaded is reused.
#pragma once

#include <cublasLt.h>

#include <c10/core/Device.h>
#include <c10/cuda/CUDAStream.h>

#include <cstddef>

namespace tileops::cublaslt {

struct LtApi {
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtGetVersion) get_version;
  decltype(&::cublasLtGetStatusName) status_name;
  decltype(&::cublasLtMatmulDescCreate) desc_create;
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) layout_set;
  decltype(&::cublasLtMatmulPreferenceCreate) pref_create;
  decltype(&::cublasLtMatmulPreferenceDestroy) pref_destroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) pref_set;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&::cublasLtMatmul) matmul;
};

// Loaded once; throws c10::Error naming every file tried when no usable libcublasLt is found.
const LtApi& lt();
// Throws c10::Error "<op>: cuBLASLt <what> failed: <status name>" unless s is CUBLAS_STATUS_SUCCESS.
void check(cublasStatus_t s, const char* op, const char* what);
// One handle per device, created on first use (a kernel's build), never destroyed.
cublasLtHandle_t handle(c10::DeviceIndex device);

// Scratch memory for cuBLASLt's split-K and stream-K algorithms, one buffer per (device, stream),
// from torch's caching allocator. Null (size 0) when the stream has none yet and is being captured:
// capture forbids allocation, so the launch takes the plan made for no workspace.
struct Workspace {
  void* ptr = nullptr;
  size_t size = 0;
};
Workspace workspace(const c10::cuda::CUDAStream& stream);
size_t workspace_bytes(c10::DeviceIndex device);

}  // namespace tileops::cublaslt

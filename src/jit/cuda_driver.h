// The CUDA driver and NVRTC, loaded with dlopen at first use so that libtileops.so loads (and its
// CPU/reference paths work) on machines without a GPU or driver. `ldd libtileops.so` shows neither.
#pragma once
#include <cuda.h>
#include <nvrtc.h>

#include <string>
#include <vector>

namespace tileops::jit {

struct DriverApi {
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext*);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int*, CUfunction, int, size_t);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**);  // may be null
  CUresult (*cuStreamIsCapturing)(CUstream, CUstreamCaptureStatus*);
};

struct NvrtcApi {
  nvrtcResult (*nvrtcVersion)(int*, int*);
  const char* (*nvrtcGetErrorString)(nvrtcResult);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                    const char* const*);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
  nvrtcResult (*nvrtcAddNameExpression)(nvrtcProgram, const char*);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*nvrtcGetLoweredName)(nvrtcProgram, const char*, const char**);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
};

// Extra folders to search for libnvrtc (e.g. the torch wheel's nvidia/cu13/lib). Call before nvrtc().
void add_library_search_dir(const std::string& dir);

// Loaded once (thread-safe). Throw JitError saying what was tried when the library is missing.
const DriverApi& driver();
const NvrtcApi& nvrtc();
// True when libcuda.so.1 can be loaded and cuInit(0) succeeds. Never throws.
bool driver_available() noexcept;

// Throws JitError "<what>: <CUDA error name>: <string>" when r != CUDA_SUCCESS.
void check_cu(CUresult r, const char* what);
// The primary context of a device (the one the CUDA runtime, hence torch, uses); retained once.
CUcontext primary_context(int device_ordinal);

// Makes `ctx` current for a scope when it is not already (threads that never touched CUDA have no
// current context; driver calls there fail with CUDA_ERROR_INVALID_CONTEXT).
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  bool pushed_ = false;
};

// NVRTC version as major*1000 + minor*10 (e.g. 13000).
int nvrtc_version();

}  // namespace tileops::jit

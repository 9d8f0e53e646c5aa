#include "jit/cuda_driver.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "jit/jit_error.h"
#include "jit/nvrtc_compiler.h"

using namespace tileops::jit;

// gmock is not always installed; a substring check with the whole text on failure is enough.
#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

TEST(Driver, UnavailableWithoutGpuDoesNotThrow) {
  bool available = true;
  EXPECT_NO_THROW(available = driver_available());
  if (available) GTEST_SKIP() << "a CUDA driver and GPU are present";
  EXPECT_FALSE(driver_available());  // the cached answer stays the same
}

TEST(Driver, ThrowsMentioningLibcuda) {
  if (driver_available()) GTEST_SKIP() << "a CUDA driver and GPU are present";
  std::string first;
  try {
    driver();
    FAIL() << "expected a JitError";
  } catch (const JitError& e) {
    first = e.what();
    EXPECT_CONTAINS(first, "libcuda");
    EXPECT_CONTAINS(first, "no CUDA driver/GPU");
  }
  try {
    driver();
    FAIL() << "expected a JitError";
  } catch (const JitError& e) {
    EXPECT_EQ(first, e.what());  // the failure is cached, with the same message
  }
}

TEST(Driver, CheckCu) {
  EXPECT_NO_THROW(check_cu(CUDA_SUCCESS, "ok"));
  try {
    check_cu(CUDA_ERROR_INVALID_VALUE, "cuThing(x)");
    FAIL() << "expected a JitError";
  } catch (const JitError& e) {
    EXPECT_CONTAINS(e.what(), "cuThing(x): ");
    if (driver_available()) {
      EXPECT_CONTAINS(e.what(), "CUDA_ERROR_INVALID_VALUE");
    }
  }
}

// Only on a GPU machine: every resolved entry point works end to end on a freshly compiled kernel.
TEST(Driver, LoadsAndLaunchesCompiledKernel) {
  if (!driver_available()) GTEST_SKIP() << "no CUDA driver/GPU";
  add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
  const DriverApi& cu = driver();
  int version = 0, major = 0, minor = 0;
  check_cu(cu.cuDriverGetVersion(&version), "cuDriverGetVersion");
  CUdevice dev;
  check_cu(cu.cuDeviceGet(&dev, 0), "cuDeviceGet");
  check_cu(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "major");
  check_cu(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "minor");
  CUcontext ctx, popped;
  check_cu(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check_cu(cu.cuCtxPushCurrent(ctx), "cuCtxPushCurrent");

  KernelSource src;
  src.name = "noop";
  src.source = "template <int N> __global__ void noop(int* p) { if (p) p[threadIdx.x % N] = 1; }\n";
  src.name_expression = "noop<4>";
  src.arch = "sm_" + std::to_string(major * 10 + minor);
  Cubin cubin = compile_to_cubin(src);
  CUmodule mod;
  CUfunction fn;
  check_cu(cu.cuModuleLoadData(&mod, cubin.image.data()), "cuModuleLoadData");
  check_cu(cu.cuModuleGetFunction(&fn, mod, cubin.lowered_name.c_str()), "cuModuleGetFunction");
  check_cu(cu.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024), "cuFuncSetAttribute");
  CUstreamCaptureStatus capturing;
  check_cu(cu.cuStreamIsCapturing(nullptr, &capturing), "cuStreamIsCapturing");
  EXPECT_EQ(capturing, CU_STREAM_CAPTURE_STATUS_NONE);
  int* null_ptr = nullptr;
  void* args[] = {&null_ptr};
  check_cu(cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel");
  if (cu.cuLaunchKernelEx) {
    CUlaunchConfig cfg{};
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 32;
    cfg.blockDimY = cfg.blockDimZ = 1;
    check_cu(cu.cuLaunchKernelEx(&cfg, fn, args, nullptr), "cuLaunchKernelEx");
  }
  CUcontext current;
  check_cu(cu.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  EXPECT_EQ(current, ctx);
  // cuCtxSynchronize is not part of DriverApi: look it up in the already loaded driver.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  auto sync = reinterpret_cast<CUresult (*)()>(dlsym(lib, "cuCtxSynchronize"));
  ASSERT_NE(sync, nullptr);
  check_cu(sync(), "cuCtxSynchronize");
  check_cu(cu.cuModuleUnload(mod), "cuModuleUnload");
  check_cu(cu.cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
  EXPECT_EQ(popped, ctx);
  check_cu(cu.cuCtxSetCurrent(nullptr), "cuCtxSetCurrent");
}

// Resolving the entry points of a library opened with dlopen (the CUDA driver, NVRTC, cuBLASLt).
#pragma once

#include <dlfcn.h>

#include <string>

namespace tileops::jit {

// Resolves `name` into `fn`; when absent, appends the name to *missing (if given) and returns false.
template <class Fn>
bool resolve(void* lib, const char* name, Fn& fn, std::string* missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn && missing) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return fn != nullptr;
}

}  // namespace tileops::jit

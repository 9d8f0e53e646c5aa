// Errors raised by the torch-free JIT layer; the boundary turns them into c10::Error.
#pragma once
#include <stdexcept>
#include <string>

namespace tileops::jit {
struct JitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
}  // namespace tileops::jit

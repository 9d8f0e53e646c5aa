// The activation family on the nvrtc target: which specialisation of
// src/kernels/activation/{unary,gated}_fwd.cuh serves a call, and its source (for the builders in
// activation_fwd.cpp and the NVRTC compile test).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "jit/nvrtc_compiler.h"

namespace tileops::nvrtc {

// Same ids as kAct* in src/kernels/activation/act.cuh.
enum class Act : int { Relu = 0, Silu = 1, Gelu = 2, GeluTanh = 3 };

struct ActivationPlan {
  c10::ScalarType dtype;
  Act act;
  bool gated;  // y = act(x[..., :d]) * x[..., d:] instead of y = act(x)
  int vec;     // elements per access (16 bytes / element size at most)
};

constexpr int kActivationThreads = 256;
constexpr int kActivationUnroll = 4;

// Widest power-of-two access (in elements, <= 16 bytes) that every pointer's alignment and
// `divisor` (the gated row width d; 0 = no constraint) allow.
int activation_vec(c10::ScalarType dtype, int64_t divisor, std::initializer_list<const void*> ptrs);
std::string activation_name(const ActivationPlan& p, const std::string& arch);
jit::KernelSource activation_source(const ActivationPlan& p, const std::string& arch);

}  // namespace tileops::nvrtc

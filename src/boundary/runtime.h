// The boundary runtime, called by the generated operator bodies: target resolution, kernel cache,
// build (refused for meta tensors and during CUDA graph capture), launch.
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>
#include <optional>

#include "tileops/op_call.h"

namespace tileops::runtime {

// checks done -> resolve target -> identity -> cache lookup (-> build) -> launch.
void invoke(const OpCall& call, const std::optional<c10::string_view>& target);
// Which target serves each op on CPU and on CUDA when a call names none, and which targets hold a
// pending kernel for it: a JSON array in op-table order ({"cpu": "reference", "cuda": "nvrtc",
// "pending": []}; null where nothing serves the device).
std::string serving_json();

// A contiguous output (torch.empty's result). CUDA tensors of concrete sizes come straight from
// the device's allocator, as ATen's own kernels allocate theirs; anything else goes through at::empty.
at::Tensor empty(c10::SymIntArrayRef sizes, const at::TensorOptions& options);

// Autograd guard: error when grad mode is on and an input requires grad (no silent graph drop).
// `hint` (may be null) is appended, e.g. how to switch on a pairing the op has.
void refuse_grad(const char* op, std::initializer_list<const at::Tensor*> inputs, const char* hint = nullptr);
// torch's rule for out= functions: with grad mode on, no argument (inputs or `out`) may require grad.
void refuse_out_grad(const char* op, std::initializer_list<const at::Tensor*> args);
// Grad mode is on and an input requires grad: the case an autograd pairing records a graph for.
bool wants_grad(std::initializer_list<const at::Tensor*> inputs);
// The current stream of a CUDA device is being captured into a CUDA graph (false for other devices).
bool stream_is_capturing(c10::Device device);
// Version counter bump for tensors a branch writes (what ADInplaceOrView would do).
void bump_version(const at::Tensor& t);

}  // namespace tileops::runtime

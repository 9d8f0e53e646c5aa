// The in-tree "reference" target: every op through ATen calls. Serves CPU by default and any
// device when asked by name; the correctness oracle for the other targets.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tileops/target.h"

namespace tileops::reference {

// An optional tensor of a view (nullptr: absent) as ATen's optional argument.
inline std::optional<at::Tensor> maybe(const at::Tensor* t) { return t ? std::optional<at::Tensor>(*t) : std::nullopt; }

// The reference target reads some inputs on the host (lengths, offsets, routes, page tables) to check
// or plan from them: a device sync, which CUDA graph capture forbids. Refused by name during capture,
// before the read would break it: such an op has no capturable CUDA implementation yet.
void refuse_host_read_during_capture(const char* op, const char* name, const at::Tensor& t);

// An integer tensor's values read on the host (one device sync), for checks and host-side tables.
inline std::vector<int64_t> host_values(const char* op, const char* name, const at::Tensor& t) {
  refuse_host_read_during_capture(op, name, t);
  const at::Tensor host = t.to(at::kCPU).to(at::kLong).contiguous();
  const int64_t* p = host.const_data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + host.numel());
}

// Reference kernels hold no state: one per device, identity is empty.
template <class K>
KernelBuilder stateless_builder(std::string name) {
  KernelBuilder b;
  b.identity = [](const OpCall&) { return BuildKey{}; };
  b.build = [](const OpCall&, const BuildKey&) -> std::shared_ptr<const Kernel> { return std::make_shared<K>(); };
  b.describe = [name](const BuildKey&) { return name; };
  return b;
}

}  // namespace tileops::reference

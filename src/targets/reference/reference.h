// The in-tree "reference" target: every op through ATen calls. Serves CPU by default and any
// device when asked by name; the correctness oracle for the other targets.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>

#include "tileops/target.h"

namespace tileops::reference {

// An optional tensor of a view (nullptr: absent) as ATen's optional argument.
inline std::optional<at::Tensor> maybe(const at::Tensor* t) { return t ? std::optional<at::Tensor>(*t) : std::nullopt; }

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

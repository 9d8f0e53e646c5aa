// tileops/ops.h — the op table generated from manifests/, readable from C++.
//
//   for (const tileops::OpInfo& op : tileops::op_table())
//     std::cout << op.op_class << " -> " << op.name << "\n";
//   tileops::compile_op_names("RMSNormFwdOp");   // {"tileops::norm_rms_norm_fwd"}
#pragma once

#include <c10/util/ArrayRef.h>

#include <string>
#include <string_view>
#include <vector>

namespace tileops {

struct OpInfo {
  const char* op_class;                  // "RMSNormFwdOp"
  const char* family;                    // "norm"
  const char* name;                      // operator base name: "norm_rms_norm_fwd"
  const char* ref_api;                   // "torch.nn.functional.rms_norm"
  const char* manifest;                  // "manifests/norm.yaml:5"
  bool has_boundary;                     // call-time tensor inputs and no composition (docs/CONTRACT.md §3)
  const char* const* operators;          // every side-effect branch, qualified: "tileops::..."
  int num_operators;
  const char* const* compile_op_names;   // the operators of the compile boundary; empty without one
  int num_compile_op_names;
};

// Implemented ops, indexed by op id (OpCall::op_id).
c10::ArrayRef<OpInfo> op_table();
// The whole manifest model as JSON (every entry, spec-only ones too); used by the Python package.
const char* op_table_json();
// Looks an op up by class name ("RMSNormFwdOp") or operator base name; nullptr if unknown.
const OpInfo* find_op(std::string_view class_or_name);
// compile_op_names of an op class; throws std::invalid_argument for an unknown class.
std::vector<std::string> compile_op_names(std::string_view op_class);

}  // namespace tileops

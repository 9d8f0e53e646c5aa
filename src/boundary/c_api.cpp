// Op-table lookups (tileops/ops.h) and a small C ABI for the Python package (ctypes): counters,
// targets, compile_op_names. Operators themselves are reached through torch.ops.tileops.
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "boundary/runtime.h"
#include "jit/kernel_record.h"
#include "targets/nvrtc/offline_plan.h"
#include "tileops/ops.h"
#include "tileops/target.h"

namespace tileops {

const OpInfo* find_op(std::string_view class_or_name) {
  for (const OpInfo& op : op_table())
    if (class_or_name == op.op_class || class_or_name == op.name) return &op;
  return nullptr;
}

std::vector<std::string> compile_op_names(std::string_view op_class) {
  const OpInfo* op = find_op(op_class);
  if (op == nullptr) throw std::invalid_argument("tileops: unknown op class '" + std::string(op_class) + "'");
  return std::vector<std::string>(op->compile_op_names, op->compile_op_names + op->num_compile_op_names);
}

}  // namespace tileops

namespace {
// Strings handed to Python live here until the next call on the same thread.
thread_local std::string t_result;

const char* hand_out(std::string s) {
  t_result = std::move(s);
  return t_result.c_str();
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : "\n") + s;
  return out;
}
}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* tileops_op_table_json() { return tileops::op_table_json(); }

// Valid until the next call on any thread (a thread-local copy): the Python loader copies it at once.
__attribute__((visibility("default"))) const char* tileops_serving_json() {
  static thread_local std::string json;
  json = tileops::runtime::serving_json();
  return json.c_str();
}

__attribute__((visibility("default"))) int64_t tileops_counter(const char* name) {
  const auto s = tileops::runtime_stats();
  const std::string n(name);
  if (n == "kernel_builds") return s.kernel_builds;
  if (n == "kernel_hits") return s.kernel_hits;
  if (n == "capture_refusals") return s.capture_refusals;
  if (n == "nvrtc_compiles") return s.nvrtc_compiles;
  if (n == "disk_cache_hits") return s.disk_cache_hits;
  if (n == "module_loads") return s.module_loads;
  return -1;
}

__attribute__((visibility("default"))) void tileops_reset_counters() { tileops::reset_runtime_stats(); }

__attribute__((visibility("default"))) void tileops_clear_kernel_caches() { tileops::clear_kernel_caches(); }

__attribute__((visibility("default"))) const char* tileops_target_names() { return hand_out(joined(tileops::target_names())); }

// Returns "" on success, else the error message.
__attribute__((visibility("default"))) const char* tileops_set_default_target(const char* name) {
  try {
    tileops::set_default_target(name ? std::optional<std::string>(name) : std::nullopt);
    return hand_out("");
  } catch (const c10::Error& e) {
    return hand_out(e.what_without_backtrace());
  }
}

__attribute__((visibility("default"))) const char* tileops_default_target() {
  return hand_out(tileops::default_target().value_or(""));
}

__attribute__((visibility("default"))) const char* tileops_take_registration_errors() {
  return hand_out(joined(tileops::take_registration_errors()));
}

__attribute__((visibility("default"))) int tileops_unregister_target(const char* name) {
  return tileops::unregister_target(name) ? 1 : 0;
}

// Offline warm-up (python -m tileops.warmup --workloads): op calls made on this thread between
// begin and end, with CPU tensors, plan for the named device and build nothing. begin returns "" or
// the error (an unknown device name); end returns the collected kernels as record lines
// (TILEOPS_RECORD_KERNELS format, each kernel once), which tileops-warmup --record compiles.
__attribute__((visibility("default"))) const char* tileops_begin_offline_plan(const char* device) {
  try {
    tileops::nvrtc::begin_offline_plan(device ? device : "");
    return hand_out("");
  } catch (const std::exception& e) {
    return hand_out(e.what());
  }
}

__attribute__((visibility("default"))) const char* tileops_end_offline_plan() {
  std::vector<std::string> lines;
  for (const auto& src : tileops::nvrtc::end_offline_plan()) {
    std::string line = tileops::jit::record_line(src);
    if (std::find(lines.begin(), lines.end(), line) == lines.end()) lines.push_back(std::move(line));
  }
  return hand_out(joined(lines));
}

}  // extern "C"

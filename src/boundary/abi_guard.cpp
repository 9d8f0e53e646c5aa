// Load-time ABI guard. The build records the torch it compiled against (version, C++11 ABI flag,
// CUDA major); at load, a static initializer compares that with the running libtorch, whose version
// it reads from caffe2::GetBuildOptions() (TORCH_VERSION, CUDA_VERSION: data of the loaded libtorch,
// unlike the compile-time TORCH_VERSION macros; at::show_config() would initialise CUDA).
//
// A static initializer cannot make dlopen fail, so on a mismatch it prints one message at load and
// every op call raises it. tileops.load() (Python) reads the same record from the file *before*
// dlopen and raises there, which also covers a torch whose symbols would not even resolve.
// Both read the one record below, from the loaded bytes here (so a copy of the file with its record
// edited is a library built against another torch: how the tests make one).
#include "boundary/abi_guard.h"

#include <caffe2/core/common.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>
#include <string>

// Found by tileops/__init__.py in the file's bytes before loading it: keep the prefix and layout.
// Not const: the compiler must read what was loaded, not fold the literal into the checks below.
extern "C" __attribute__((visibility("default"), used)) char tileops_build_record[] =
    "tileops-build-record:torch=" TILEOPS_BUILT_TORCH_VERSION ";cxx11_abi=" TILEOPS_BUILT_CXX11_ABI
    ";cuda=" TILEOPS_BUILT_CUDA_MAJOR ";";

namespace tileops::abi {
namespace {

struct TorchId {
  std::string version;     // "2.14.1" (the part before any "+cu130" local tag)
  std::string cuda_major;  // "13", or "none" for a CPU-only torch
};

std::string base_version(const std::string& v) { return v.substr(0, v.find('+')); }

// The value of `key` in the build record ("tileops-build-record:k=v;k=v;"), or "".
std::string record_field(const std::string& key) {
  const std::string record(tileops_build_record);
  const std::string fields = ";" + record.substr(record.find(':') + 1);
  const auto at = fields.find(";" + key + "=");
  if (at == std::string::npos) return "";
  const auto from = at + key.size() + 2;
  return fields.substr(from, fields.find(';', from) - from);
}

std::string build_option(const char* key) {
  const auto& options = caffe2::GetBuildOptions();
  const auto it = options.find(key);
  return it == options.end() ? "" : it->second;
}

TorchId running_torch() {
  const std::string cuda = build_option("CUDA_VERSION");
  return {build_option("TORCH_VERSION"), cuda.empty() ? "none" : cuda.substr(0, cuda.find('.'))};
}

std::string mismatch_message() {
  const TorchId run = running_torch();
  const std::string torch = record_field("torch"), cuda = record_field("cuda");
  if (base_version(run.version) == base_version(torch) && run.cuda_major == cuda) return "";
  return "libtileops was built against torch " + torch + " (CUDA " + cuda + ") but the running torch is " +
         run.version + " (CUDA " + run.cuda_major + "); rebuild libtileops against the running torch or "
         "install the matching one";
}

const std::string& mismatch() {
  static const std::string message = mismatch_message();
  return message;
}

// Runs at load: the one message a direct torch.ops.load_library shows.
const bool g_checked_at_load = [] {
  if (!mismatch().empty()) std::fprintf(stderr, "tileops: %s\n", mismatch().c_str());
  return true;
}();

}  // namespace

void require_matching_torch() { TORCH_CHECK(mismatch().empty(), mismatch()); }  // the boundary prefixes the op

}  // namespace tileops::abi

// "" when the running torch matches the build, else the message (tileops.load() raises it).
extern "C" __attribute__((visibility("default"))) const char* tileops_abi_mismatch() {
  return tileops::abi::mismatch().c_str();
}

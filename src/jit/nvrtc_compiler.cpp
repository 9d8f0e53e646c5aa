#include "jit/nvrtc_compiler.h"

#include <cctype>
#include <chrono>
#include <cstdio>

#include "common/log.h"
#include "jit/cuda_driver.h"
#include "jit/hash.h"
#include "jit/jit_error.h"

namespace tileops::jit {
namespace {

// Bump when the way keys or cache entries are derived changes, so old entries are never reused.
constexpr uint64_t kCacheFormatVersion = 3;

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// "   3 | text" for every line, so errors can be matched against NVRTC's "file(3): error".
std::string numbered(const std::string& text) {
  std::string out;
  int line = 1;
  size_t start = 0;
  while (start < text.size() || start == 0) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    char num[16];
    std::snprintf(num, sizeof num, "%4d | ", line++);
    out += num;
    out.append(text, start, end - start);
    out += '\n';
    start = end + 1;
  }
  return out;
}

std::vector<std::string> all_options(const KernelSource& src) {
  std::vector<std::string> opts = {"--gpu-architecture=" + src.arch, "-std=c++17"};
  opts.insert(opts.end(), src.options.begin(), src.options.end());
  return opts;
}

// Destroys the program on every exit path.
struct Program {
  const NvrtcApi& api;
  nvrtcProgram prog = nullptr;
  ~Program() {
    if (prog) api.nvrtcDestroyProgram(&prog);
  }
};

std::string program_log(const NvrtcApi& api, nvrtcProgram prog) {
  size_t size = 0;
  if (api.nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (api.nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // drop the terminating NUL
  return log;
}

}  // namespace

Cubin compile_to_cubin(const KernelSource& src) {
  const NvrtcApi& api = nvrtc();
  const std::vector<std::string> opts = all_options(src);
  auto fail = [&](const std::string& what) -> JitError {
    return JitError("tileops: NVRTC " + what + " for kernel " + src.name + " (arch " + src.arch + ")");
  };
  auto check = [&](nvrtcResult r, const char* step) {
    if (r != NVRTC_SUCCESS) throw fail(std::string(step) + " failed: " + api.nvrtcGetErrorString(r));
  };
  if (src.name_expression.empty()) throw fail("needs a name_expression");

  std::vector<const char*> hdr_text, hdr_names, opt_ptrs;
  std::vector<std::string> hdr_list;
  for (const auto& [name, text] : src.headers) {
    hdr_names.push_back(name.c_str());
    hdr_text.push_back(text.c_str());
    hdr_list.push_back(name);
  }
  for (const auto& o : opts) opt_ptrs.push_back(o.c_str());

  auto t0 = std::chrono::steady_clock::now();
  Program p{api};
  const std::string file_name = src.name + ".cu";  // appears in NVRTC's log lines
  check(api.nvrtcCreateProgram(&p.prog, src.source.c_str(), file_name.c_str(),
                               static_cast<int>(hdr_text.size()), hdr_text.data(), hdr_names.data()),
        "nvrtcCreateProgram");
  check(api.nvrtcAddNameExpression(p.prog, src.name_expression.c_str()), "nvrtcAddNameExpression");
  nvrtcResult r = api.nvrtcCompileProgram(p.prog, static_cast<int>(opt_ptrs.size()), opt_ptrs.data());
  const std::string log = program_log(api, p.prog);
  if (r != NVRTC_SUCCESS) {
    std::string msg = fail("compilation failed").what();
    msg += std::string(": ") + api.nvrtcGetErrorString(r);
    msg += "\n  options: " + join(opts, " ");
    msg += "\n  name expression: " + src.name_expression;
    if (!hdr_list.empty()) msg += "\n  headers: " + join(hdr_list, ", ");
    msg += "\n--- NVRTC log ---\n" + log + "\n--- source " + file_name + " ---\n" + numbered(src.source);
    throw JitError(msg);
  }

  Cubin out;
  const char* lowered = nullptr;
  check(api.nvrtcGetLoweredName(p.prog, src.name_expression.c_str(), &lowered), "nvrtcGetLoweredName");
  out.lowered_name = lowered;
  size_t size = 0;
  check(api.nvrtcGetCUBINSize(p.prog, &size), "nvrtcGetCUBINSize");
  // NVRTC only emits CUBIN for a real architecture (sm_XX); compute_XX gives PTX and no CUBIN.
  if (size == 0) throw fail("produced no CUBIN (the arch must be a real sm_XX)");
  out.image.resize(size);
  check(api.nvrtcGetCUBIN(p.prog, out.image.data()), "nvrtcGetCUBIN");

  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  log::debug("tileops: compiled " + src.name + " (" + join(opts, " ") + ") in " +
             std::to_string(static_cast<int>(ms)) + " ms" + (log.empty() ? "" : "; NVRTC log:\n" + log));
  return out;
}

uint64_t headers_digest(const std::vector<std::pair<std::string, std::string>>& headers) {
  Hasher h;
  h.add(headers.size());
  for (const auto& [name, text] : headers) h.add(name).add(text);
  return h.digest();
}

std::string disk_key(const KernelSource& src) {
  Hasher h;
  h.add(kCacheFormatVersion).add(src.source);
  h.add(src.headers_digest != 0 ? src.headers_digest : headers_digest(src.headers));
  // Every option NVRTC gets, the ones this file adds included: a change to them changes the CUBIN.
  const std::vector<std::string> opts = all_options(src);
  h.add(src.name_expression).add(opts.size());
  for (const auto& o : opts) h.add(o);
  h.add(src.arch);  // the NVRTC version is added by the disk cache (disk_cache.h): not loaded for a key
  // The name becomes a file name: keep it to a safe character set and a sane length.
  std::string name = src.name.substr(0, 120);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  return name + "-" + h.hex();
}

}  // namespace tileops::jit

// tileops-warmup: fills an image kernel cache without a GPU (NVRTC only) from a record, for
// deployment images: a real run's, or the manifests' workloads planned for named devices
// (python -m tileops.warmup --workloads writes one and runs this). A process on a GPU of a recorded arch, with
// TILEOPS_CACHE_DIR_READONLY=<the folder>, then finds every recorded kernel there.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "jit/cuda_driver.h"
#include "jit/jit_error.h"
#include "jit/warmup.h"
#include "targets/nvrtc/kernel_sources.h"

namespace {

constexpr const char* kUsage =
    "usage: tileops-warmup --record FILE --cache-dir DIR [--arch sm_XX ...] [--jobs N] [--nvrtc-dir DIR ...]\n"
    "  Compiles every kernel in FILE (written by a run with TILEOPS_RECORD_KERNELS=FILE) into DIR, an image\n"
    "  cache for TILEOPS_CACHE_DIR_READONLY. Needs NVRTC, no GPU; the runtime's CUDA driver must be at\n"
    "  least as new as this NVRTC's CUDA release.\n"
    "  --arch        only the kernels recorded for these archs (default: every recorded arch)\n"
    "  --jobs        NVRTC compilations at once (default: the CPU count)\n"
    "  --nvrtc-dir   a folder to look for libnvrtc in (also TILEOPS_NVRTC_LIBRARY=path)\n";

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "tileops-warmup: %s\n%s", msg.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string record, dir;
  std::vector<std::string> archs;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) return usage_error(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--record") record = v;
    else if (a == "--cache-dir") dir = v;
    else if (a == "--arch") archs.push_back(v);
    else if (a == "--nvrtc-dir") tileops::jit::add_library_search_dir(v);
    else if (a == "--jobs") jobs = std::atoi(v.c_str());
    else return usage_error("unknown argument " + a);
  }
  if (record.empty() || dir.empty()) return usage_error("--record and --cache-dir are required");
  if (jobs < 1) return usage_error("--jobs must be a positive number");
  for (const auto& a : archs)
    if (a.rfind("sm_", 0) != 0 || a.size() < 5)
      return usage_error("--arch " + a + " is not a real architecture such as sm_90a or sm_80");
#ifdef TILEOPS_NVRTC_HINT_DIR
  tileops::jit::add_library_search_dir(TILEOPS_NVRTC_HINT_DIR);
#endif

  tileops::jit::HeaderFiles headers;
  for (const auto& f : tileops::nvrtc::kernel_files()) headers.emplace_back(f.name, f.text);
  try {
    const auto sources = tileops::jit::sources_from_record(record, headers, archs);
    tileops::jit::DiskCacheOptions options;
    options.dir = dir;
    options.image = true;
    const tileops::jit::DiskCache cache(options);
    if (!cache.can_store()) {
      std::fprintf(stderr, "tileops-warmup: cannot use %s as a kernel cache (see the warning above)\n", dir.c_str());
      return 1;
    }
    auto result = tileops::jit::warm(sources, cache, jobs);
    for (const auto& src : sources)  // every kernel must now be readable, whole and verified
      if (!cache.load(tileops::jit::disk_key(src))) result.errors.push_back(src.name + ": not stored");
    for (const auto& e : result.errors) std::fprintf(stderr, "tileops-warmup: %s\n", e.c_str());
    std::printf("tileops-warmup: %zu kernels: %zu compiled, %zu already present, %zu failed (NVRTC %d) in %s\n",
                sources.size(), result.compiled, result.present, result.errors.size(),
                tileops::jit::nvrtc_version(), dir.c_str());
    return result.errors.empty() ? 0 : 1;
  } catch (const tileops::jit::JitError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

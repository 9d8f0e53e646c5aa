// Offline kernel warm-up: compiles kernels with NVRTC (no GPU needed) into an image cache folder,
// which processes on GPUs of those architectures then read through TILEOPS_CACHE_DIR_READONLY.
// Sources of the kernels to compile: a record (sources_from_record), written by a real run or by
// planning the manifests' workloads for named devices in libtileops (python -m tileops.warmup
// --workloads); warm() takes KernelSources from anywhere.
#pragma once
#include <string>
#include <vector>

#include "jit/disk_cache.h"
#include "jit/kernel_record.h"

namespace tileops::jit {

// The distinct kernels of a TILEOPS_RECORD_KERNELS file whose arch is in `archs` (every recorded
// arch when empty), rebuilt with the headers at hand. Throws JitError naming the file and line for
// a bad line, a kernel recorded with other kernel sources, or an arch the file has no kernel for.
std::vector<KernelSource> sources_from_record(const std::string& path, const HeaderFiles& available,
                                              const std::vector<std::string>& archs);

struct WarmupResult {
  size_t compiled = 0;              // NVRTC builds stored in the folder
  size_t present = 0;               // already there (an earlier or a concurrent warm-up)
  std::vector<std::string> errors;  // one line per kernel that failed to compile
};
// Every source into `cache` (looked up first; a miss is compiled under the cache's lock), on `jobs`
// threads.
WarmupResult warm(const std::vector<KernelSource>& sources, const DiskCache& cache, int jobs);

}  // namespace tileops::jit

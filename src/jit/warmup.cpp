#include "jit/warmup.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "jit/jit_error.h"

namespace tileops::jit {

std::vector<KernelSource> sources_from_record(const std::string& path, const HeaderFiles& available,
                                              const std::vector<std::string>& archs) {
  std::ifstream in(path);
  if (!in) throw JitError("tileops-warmup: cannot read the kernel record " + path);
  std::vector<KernelSource> out;
  std::set<std::string> keys, recorded_archs;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    try {
      KernelRecord rec = parse_record_line(line);
      recorded_archs.insert(rec.arch);
      if (!archs.empty() && std::find(archs.begin(), archs.end(), rec.arch) == archs.end()) continue;
      KernelSource src = source_from_record(rec, available);
      if (keys.insert(disk_key(src)).second) out.push_back(std::move(src));
    } catch (const JitError& e) {
      throw JitError(path + ":" + std::to_string(n) + ": " + e.what());
    }
  }
  std::string have;
  for (const auto& a : recorded_archs) have += (have.empty() ? "" : ", ") + a;
  for (const auto& a : archs)
    if (!recorded_archs.count(a))
      throw JitError(path + ": no kernel was recorded for " + a + " (recorded: " + (have.empty() ? "none" : have) +
                     "); a record replays the plans of the GPU it was made on");
  return out;
}

WarmupResult warm(const std::vector<KernelSource>& sources, const DiskCache& cache, int jobs) {
  WarmupResult result;
  std::mutex mu;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < sources.size();) {
      const KernelSource& src = sources[i];
      bool built = false;
      std::string error;
      try {
        cache.get_or_build(disk_key(src), [&] { return compile_to_cubin(src); }, &built);
      } catch (const std::exception& e) {
        error = e.what();
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!error.empty()) result.errors.push_back(src.name + ": " + error);
      else ++(built ? result.compiled : result.present);
    }
  };
  std::vector<std::thread> threads;
  const int n = std::max(1, std::min<int>(jobs, static_cast<int>(sources.size())));
  for (int t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  return result;
}

}  // namespace tileops::jit

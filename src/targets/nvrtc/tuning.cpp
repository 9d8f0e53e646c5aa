#include "targets/nvrtc/tuning.h"

#include <c10/util/Exception.h>

#include <charconv>
#include <cstdlib>

namespace tileops::nvrtc {

bool Tuning::operator==(const Tuning& o) const {
  for (const auto& k : tuning_keys())
    if (this->*k.field != o.*k.field) return false;
  return true;
}

const std::vector<TuningKey>& tuning_keys() {
  static const std::vector<TuningKey> keys{
      {"rms_vecs_per_thread", &Tuning::rms_vecs_per_thread, 1, 16, "norm rows a CTA: vectors a thread"},
      {"rms_few_rows_vpt", &Tuning::rms_few_rows_vpt, 1, 16, "calls of few RMSNorm rows: vectors a thread"},
      {"softmax_vecs_per_thread", &Tuning::softmax_vecs_per_thread, 1, 8, "softmax rows a CTA: vectors a thread"},
      {"staged_min_row_bytes", &Tuning::staged_min_row_bytes, 16, 1 << 30, "shortest staged row, bytes"},
      {"staged_row_vpt", &Tuning::staged_row_vpt, 1, 32, "staged rows: vectors a thread"},
      {"staged_cluster_vpt", &Tuning::staged_cluster_vpt, 1, 32, "staged RMSNorm cluster chunk: vectors a thread"},
      {"cluster_cta_bytes", &Tuning::cluster_cta_bytes, 1024, 1 << 20, "cluster rows: bytes a CTA"},
      {"cluster_vpt", &Tuning::cluster_vpt, 1, 16, "register cluster chunk: vectors a thread"},
      {"cluster_max", &Tuning::cluster_max, 2, 16, "largest cluster, CTAs"},
      {"norm_bwd_vecs_per_thread", &Tuning::norm_bwd_vecs_per_thread, 1, 16, "norm backward: vectors a thread"},
      {"norm_bwd_cta_threads", &Tuning::norm_bwd_cta_threads, 32, 1024, "norm backward: threads a CTA of short rows"},
      {"norm_bwd_blocks_per_sm", &Tuning::norm_bwd_blocks_per_sm, 1, 32, "norm backward: CTAs an SM"},
      {"act_ctas_per_sm", &Tuning::act_ctas_per_sm, 1, 1 << 16, "activations: grid cap, CTAs an SM"},
      {"ew_unroll", &Tuning::ew_unroll, 1, 8, "elementwise contiguous loop: vector steps a thread", true},
      {"ew_threads", &Tuning::ew_threads, 32, 256, "elementwise contiguous loop: most threads a CTA"},
      {"norm_bwd_plain_reduce", &Tuning::norm_bwd_plain_reduce, 1, 1,
       "norm backward: launch the reduction plainly, not as a programmatic dependent launch"},
      {"pool_max_outputs", &Tuning::pool_max_outputs, 1, 2, "max pools, window in the code: outputs a thread"},
      {"reduce_cols_warps", &Tuning::reduce_cols_warps, 1, 32, "dim reductions over columns: warps a CTA"},
      {"reduce_ctas_per_sm", &Tuning::reduce_ctas_per_sm, 1, 64, "dim reductions: CTAs an SM before a split"},
      {"reduce_split_vecs", &Tuning::reduce_split_vecs, 1, 256, "dim reductions over rows: vectors a thread a split"},
      {"reduce_cols_split_rows", &Tuning::reduce_cols_split_rows, 1, 1 << 20,
       "dim reductions over columns: rows a warp a split"},
      {"reduce_cols_vec", &Tuning::reduce_cols_vec, 1, 16, "dim reductions over columns: most elements a lane loads"},
      {"gn_vecs_per_thread", &Tuning::gn_vecs_per_thread, 1, 8, "group/instance norm rows: vectors a thread"},
      {"gn_running_vecs_per_thread", &Tuning::gn_running_vecs_per_thread, 1, 8,
       "group/instance/batch norm rows with running stats: vectors a thread"},
      {"gn_cta_threads", &Tuning::gn_cta_threads, 32, 1024, "group/instance norm rows of a warp or less: threads a CTA", true},
      {"moe_max_rows_per_expert", &Tuning::moe_max_rows_per_expert, 1, 1 << 20,
       "MoE grouped GEMM / gate-up: most rows an expert on average the one launch serves outside a capture"},
  };
  return keys;
}

std::string describe_tuning_keys() {
  std::string s;
  for (const auto& k : tuning_keys())
    s += std::string(k.name) + "  " + std::to_string(k.lo) + ".." + std::to_string(k.hi) +
         (k.pow2 ? " (powers of two)" : "") + "  " + k.what + "\n";
  return s;
}

Tuning parse_tuning(std::string_view text) {
  Tuning t;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    TORCH_CHECK(eq != std::string_view::npos, "TILEOPS_TUNE: '", entry, "' is not key=value; keys:\n",
                describe_tuning_keys());
    const std::string_view name = entry.substr(0, eq), value = entry.substr(eq + 1);
    const TuningKey* key = nullptr;
    for (const auto& k : tuning_keys())
      if (name == k.name) key = &k;
    TORCH_CHECK(key, "TILEOPS_TUNE: unknown key '", name, "'; keys:\n", describe_tuning_keys());
    int v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    TORCH_CHECK(ec == std::errc() && end == value.data() + value.size() && v >= key->lo && v <= key->hi,
                "TILEOPS_TUNE: ", name, "=", value, " is not an integer in ", key->lo, "..", key->hi);
    TORCH_CHECK(!key->pow2 || (v & (v - 1)) == 0, "TILEOPS_TUNE: ", name, "=", value, " is not a power of two");
    t.*(key->field) = v;
  }
  return t;
}

const Tuning& tuning() {
  static const Tuning t = [] {
    const char* v = std::getenv("TILEOPS_TUNE");
    return v ? parse_tuning(v) : Tuning{};
  }();
  return t;
}

}  // namespace tileops::nvrtc

// "key=hi<TAB>OpClass,..." lines for the keys that turn on kernels no GPU has run (tileops.pending).
extern "C" __attribute__((visibility("default"))) const char* tileops_pending_tuning() {
  static const std::string lines = [] {
    std::string s;
    for (const auto& k : tileops::nvrtc::tuning_keys())
      if (k.pending_ops) s += std::string(k.name) + "=" + std::to_string(k.hi) + "\t" + k.pending_ops + "\n";
    return s;
  }();
  return lines.c_str();
}

// The keys as text for tools without a GPU (scripts/bench/sweep.py --list-tune, through ctypes).
extern "C" __attribute__((visibility("default"))) const char* tileops_tuning_keys() {
  static const std::string keys = tileops::nvrtc::describe_tuning_keys();
  return keys.c_str();
}

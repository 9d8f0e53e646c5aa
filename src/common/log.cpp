// spdlog-backed logging. spdlog/fmt stay inside this file (torch bundles its own fmt).
#include "common/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <unordered_set>

namespace tileops::log {
namespace {

spdlog::level::level_enum level_from_env(bool* unknown) {
  const char* env = std::getenv("TILEOPS_LOG_LEVEL");
  std::string v = env ? env : "";
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  *unknown = false;
  if (v == "debug") return spdlog::level::debug;
  if (v == "info") return spdlog::level::info;
  if (v == "warn" || v == "warning" || v.empty()) return spdlog::level::warn;
  if (v == "error") return spdlog::level::err;
  if (v == "off") return spdlog::level::off;
  *unknown = true;
  return spdlog::level::warn;
}

// Not registered in spdlog's global registry: the host process (or another copy of this code in a
// plugin) may own a logger of the same name. Leaked on purpose so that logging from static
// destructors stays safe.
spdlog::logger& logger() {
  static spdlog::logger* instance = [] {
    auto* l = new spdlog::logger("tileops", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    bool unknown = false;
    l->set_level(level_from_env(&unknown));
    if (unknown)
      l->warn("unknown TILEOPS_LOG_LEVEL '{}' (expected debug|info|warn|error|off); using warn",
              std::getenv("TILEOPS_LOG_LEVEL"));
    return l;
  }();
  return *instance;
}

// Messages are logged verbatim (no format-string parsing: they may contain braces).
void emit(spdlog::level::level_enum lvl, const std::string& msg) {
  logger().log(lvl, spdlog::string_view_t(msg.data(), msg.size()));
}

}  // namespace

void debug(const std::string& msg) { emit(spdlog::level::debug, msg); }
void info(const std::string& msg) { emit(spdlog::level::info, msg); }
void warn(const std::string& msg) { emit(spdlog::level::warn, msg); }

void warn_once(const std::string& key, const std::string& msg) {
  static std::mutex mu;
  static auto* seen = new std::unordered_set<std::string>();  // leaked, like the logger
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen->insert(key).second) return;
  }
  warn(msg);
}

}  // namespace tileops::log

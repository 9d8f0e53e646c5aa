// Logging for libtileops. spdlog/fmt are confined to log.cpp (and the torch-free jit layer):
// torch bundles its own fmt, so torch-including files only see these plain functions.
#pragma once
#include <string>

namespace tileops::log {
void debug(const std::string& msg);
void info(const std::string& msg);
void warn(const std::string& msg);
// Warns once per distinct `key` for the life of the process (e.g. an unwritable cache folder).
void warn_once(const std::string& key, const std::string& msg);
}  // namespace tileops::log

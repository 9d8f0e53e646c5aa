// The process-wide autograd pairing switch (include/tileops/autograd.h).
#include "tileops/autograd.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace tileops {
namespace {

bool from_env() {
  const char* v = std::getenv("TILEOPS_AUTOGRAD");
  return v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0 || std::strcmp(v, "on") == 0);
}

// Initialised once, when the library is loaded.
std::atomic<bool> g_pairing{from_env()};

}  // namespace

bool set_autograd_pairing(bool on) { return g_pairing.exchange(on, std::memory_order_relaxed); }
bool autograd_pairing() { return g_pairing.load(std::memory_order_relaxed); }

}  // namespace tileops

extern "C" {
// For the Python package (ctypes): returns the previous state.
__attribute__((visibility("default"))) int tileops_set_autograd_pairing(int on) {
  return tileops::set_autograd_pairing(on != 0) ? 1 : 0;
}
__attribute__((visibility("default"))) int tileops_autograd_pairing() { return tileops::autograd_pairing() ? 1 : 0; }
}

// tileops/autograd.h — the opt-in autograd pairing switch.
//
// A forward op whose manifest entry says `autograd: {backward: <BwdOp>}` (e.g. RMSNormFwdOp ->
// RMSNormBwdOp) gets a generated torch::autograd::Function behind its Autograd kernel. The pairing is
// off by default: then a grad-requiring input is a clear error, as for every other op. Turn it on
// process-wide before tracing or running the forward:
//
//   tileops::set_autograd_pairing(true);       // C++
//   tileops.enable_autograd(True)              # Python
//   TILEOPS_AUTOGRAD=1                         # environment, read once when the library loads
//
// The switch is read when the forward runs (or is traced): graphs compiled or autograd graphs built
// before a change keep the behaviour they were made with.
#pragma once

namespace tileops {

// Returns the previous state. Thread-safe (one atomic).
bool set_autograd_pairing(bool on);
bool autograd_pairing();

}  // namespace tileops

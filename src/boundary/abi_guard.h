// The torch this library was built against, checked against the torch that loads it.
#pragma once

namespace tileops::abi {

// Throws c10::Error naming both torch versions when the running torch is not the one this library
// was built against (found at load time; calls refuse so nothing runs on a mismatched ABI).
void require_matching_torch();

}  // namespace tileops::abi

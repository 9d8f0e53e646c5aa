// A replayable record of the kernels a process builds (TILEOPS_RECORD_KERNELS=path): one line per
// kernel, enough to regenerate its exact KernelSource in another process, on a machine without a
// GPU (tileops-warmup). Header contents are not stored: their names and one SHA-256 over all of
// them, so a replay with other kernel sources than the recording library's is refused.
//
// Line format (fields percent-encoded; lists comma-separated):
//   tileops-kernel-v1 name=N arch=A expr=E source=S headers=H1,H2 headers_sha256=HEX options=O1,O2
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "jit/nvrtc_compiler.h"

namespace tileops::jit {

using HeaderFiles = std::vector<std::pair<std::string, std::string>>;  // include name -> content

struct KernelRecord {
  std::string name, arch, name_expression, source, headers_sha256;
  std::vector<std::string> header_names, options;
};

std::string record_line(const KernelSource& src);  // no trailing newline
// Throws JitError saying what is wrong with the line.
KernelRecord parse_record_line(const std::string& line);
// The KernelSource the record was made from, its headers taken from `available` (the library's
// embedded kernel sources). Throws JitError when one is missing or any content differs.
KernelSource source_from_record(const KernelRecord& rec, const HeaderFiles& available);
std::string headers_sha256(const HeaderFiles& headers);

// Appends src's line to the file named by TILEOPS_RECORD_KERNELS (read once), once per kernel per
// process; nothing when it is unset. One write() of a whole line with O_APPEND, so processes can
// share the file. Failures warn once.
void record_kernel(const KernelSource& src);
void record_kernel_to(const std::string& path, const KernelSource& src);

}  // namespace tileops::jit

// Which paths a session takes on a kernel with these features, and how a
// recording names them: pure logic, apart from the session that acts on it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "probe/features/kernel_features.h"
#include "probe/modes.h"

namespace allocscope {

// The probe mode for `wanted` on a kernel with these features: auto takes
// uprobe sessions where the kernel has them; session fails where it has not.
Result<ProbeMode> choose_probe_mode(const KernelFeatures& k, ProbeMode wanted);

// The paths a session takes, named for a recording (Recording::paths):
// kernel, probes (and why classic, where auto fell back), unwind, and the
// instructions that single-step here.
std::vector<std::pair<std::string, std::string>> kernel_paths(const KernelFeatures& k, ProbeMode chosen,
                                                              ProbeMode wanted, bool unwind_tables);

}  // namespace allocscope

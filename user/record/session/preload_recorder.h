// `allocscope record --no-bpf -- CMD`, and `record -- CMD` when loading BPF
// is refused (no root, no CAP_BPF): the launched command samples in process
// through the preload library, which writes each sampled trial (registers
// and the top of the stack) into a ring shared with allocscope
// (PreloadChannel). allocscope unwinds those stacks in userspace with the
// tables and step the kernel's walk uses, and records them through the same
// sink, estimates and outputs as the kernel's path. No kernel probe at all:
// what the preload library cannot enter (static or set-id programs, a
// program that defines malloc itself, a child that clears its environment)
// is not recorded, and is named.
#pragma once

#include <string>
#include <vector>

#include "record/record.h"

namespace allocscope {

// `why`: what the summary says of the path ("--no-bpf", or the refusal).
// `set_aside`: default outputs an earlier attempt with BPF set aside.
int record_without_bpf(const RecordConfig& config, const std::string& why,
                       const std::vector<std::string>& set_aside = {});

}  // namespace allocscope

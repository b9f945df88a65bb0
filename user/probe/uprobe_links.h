// uprobe_multi and uprobe session links, made with bpf(2) directly: the
// libbpf Debian 12 ships predates both.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace allocscope {

// Attach types from the kernel's UAPI.
constexpr uint32_t kTraceUprobeMulti = 48;    // BPF_TRACE_UPROBE_MULTI, 6.6
constexpr uint32_t kTraceUprobeSession = 57;  // BPF_TRACE_UPROBE_SESSION, 6.13

// A link of program `prog_fd` on `offsets` of the file at `path` (one
// cookie each), in process `pid` or (0) every process. The link's fd, or
// -1 with errno set.
int create_uprobe_multi_link(int prog_fd, uint32_t attach_type, const std::string& path,
                             const std::vector<uint64_t>& offsets, const std::vector<uint64_t>& cookies,
                             pid_t pid);

}  // namespace allocscope

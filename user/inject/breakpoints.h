// The kernel's system-wide uprobes taken out of one entered process. A
// uprobe is an int3 the kernel writes into every process that maps the
// probed file (its own copy of that page), and an entered process's
// allocator calls, forwarded by allocscope's library, would still trap into
// it at every call. Writing the replaced byte back in that process alone
// leaves the probe in all the others; the kernel, when it removes the probe
// later, finds no int3 there and leaves the page be.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "base/result.h"
#include "host/proc_maps.h"

namespace allocscope::inject {

// A file whose probes are system-wide, as /proc/PID/maps names it.
struct ProbedFile {
  uint32_t dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  // Each probe's file offset and the file's byte there, which the int3 replaced.
  std::vector<std::pair<uint64_t, uint8_t>> sites;
};

// Where each site of `files` lies in a process with mappings `maps` (its
// executable mappings of the same file): address and original byte.
std::vector<std::pair<uint64_t, uint8_t>> site_addresses(const std::vector<Mapping>& maps,
                                                         std::span<const ProbedFile> files);

// Writes the original byte back at each site of process `pid` that holds an
// int3 now; how many it wrote. Its mappings are read from /proc/PID/maps,
// and `kernel_named` adds the same ones as the kernel names their files
// (an overlay's file is mapped from the file below it, and since 6.10 the
// maps name the overlay's): a site matches either. Fails only when the
// process's memory cannot be opened (it ended, or tracing it is not
// allowed).
// `traced`: a thread of it this thread traces, whose /proc/PID/task/TID/mem
// is written instead: kernels built to force a write into read-only memory
// only for the process's tracer (PROC_MEM_FORCE_PTRACE, Debian's from 6.12)
// refuse the other with EIO.
Result<size_t> lift_breakpoints(pid_t pid, std::span<const ProbedFile> files,
                                std::span<const Mapping> kernel_named = {}, pid_t traced = 0);

}  // namespace allocscope::inject

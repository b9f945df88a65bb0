// What an injection needs of the target's own code, found in its mappings:
// the C library's dlopen and two short sequences of its instructions (the
// sigreturn trampoline, a `syscall; ret`), and the code no call may be
// made from inside (the C library, the dynamic loader, allocators: their
// locks may be held there). Also why a process cannot take the library at
// all, from /proc's words for it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "host/proc_maps.h"
#include "inject/remote_thread.h"

namespace allocscope::inject {

struct TargetCode {
  Gadgets gadgets;
  uint64_t dlopen = 0;
  // errno's offset from a thread's pointer (fs_base): its calls leave a
  // borrowed thread's errno as they found it. 0 when not found.
  int64_t errno_tpoff = 0;
  std::vector<std::pair<uint64_t, uint64_t>> no_calls_from;  // [start, end) of code
  std::vector<Mapping> maps;
};

// Fails with a one-line reason: a static program, musl, a C library
// without dlopen (glibc before 2.34), no usable trampoline.
Result<TargetCode> find_target_code(pid_t pid);

// Offset of `needle` in `hay`.
std::optional<size_t> find_bytes(std::span<const uint8_t> hay, std::span<const uint8_t> needle);

// Whether a file name is an allocator's library, other than the C library.
bool is_allocator_library_name(std::string_view path);

// What /proc/PID/status and /proc/PID/auxv say that keeps the library out.
struct ProcessFacts {
  bool secure_exec = false;   // set-id, or file capabilities: AT_SECURE
  bool shadow_stack = false;  // CET shadow stack on (a call's return would not match it)
  int seccomp = 0;            // 1: strict mode; 2: filters (seccomp_check.h reads them)
  pid_t tracer = 0;
};
ProcessFacts facts_from(std::string_view status, std::span<const uint8_t> auxv);
// A one-line reason, or nothing when injection may be tried.
std::optional<std::string> refusal(const ProcessFacts& facts);
Result<ProcessFacts> read_facts(pid_t pid);

}  // namespace allocscope::inject

// The events the sink takes, decoded once where they come in: the kernel's
// ring buffer records (decode_kernel_event), the preload library's trials
// (PreloadEvents) and the frees the processes send through their rings
// (RingFrees). Past this edge nothing reads the kernel's bytes, but a
// language runtime the part of a stack that is its own (runtime_part).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "allocscope.h"
#include "host/proc_maps.h"

namespace allocscope {

// A stack, sent once, that later samples name by `id` (struct as_stack_event).
struct StackEvent {
  uint32_t tgid = 0, ns_tgid = 0;
  uint16_t fn = 0;    // entry code
  uint16_t stop = 0;  // enum as_stop: why its walk ended
  uint64_t id = 0, cgroup = 0, start_ns = 0, exec_id = 0;
  std::string comm;
  std::vector<Mapping> mappings;  // of its frames, as the kernel read them at sample time
  std::vector<uint64_t> ips;      // return addresses, innermost first
  // AS_STOP_NO_TABLE: the walk to finish here, and the stack bytes from its sp.
  std::optional<as_deferred_walk> walk;
  std::vector<uint8_t> walk_stack;
  // The record's bytes past its native frames (as_stack_event from npy on):
  // the language runtimes' frames, each runtime reads its own.
  std::vector<uint8_t> runtime_part;
  // The runtime ("jvm") whose agent in the process named the frames that
  // runtime_part holds (java_record.h); empty: the kernel's record.
  std::string_view agent;
};

// A sampled allocation (struct as_alloc_event): `stack` names its StackEvent.
struct AllocEvent {
  uint32_t tgid = 0, tid = 0;
  uint16_t fn = 0, flags = 0;  // entry code; enum as_event_flags
  uint64_t ts_ns = 0, addr = 0, size = 0;
  uint64_t offset = 0;  // bytes before the sampled byte (AS_EVF_WEIGHTED: the weight)
  uint64_t stack = 0;
  std::string comm;
};

// A sampled block freed: by the kernel's probe or through a process's ring.
struct FreeEvent {
  uint32_t tgid = 0, tid = 0;
  uint64_t ts_ns = 0, addr = 0;
};

// A process forked, ran a program, exited or mapped a C library (AS_EV_FORK
// to AS_EV_MMAP), or a CPython process is at _exit (AS_EV_EXITING): the
// kernel's record, whole.
struct ProcessEvent {
  as_proc_event e{};
};

// A cgroup v2 directory made, or removed (`gone`, no path).
struct CgroupEvent {
  uint64_t id = 0;
  std::string path;
  bool gone = false;
};

// A walk met a file without an unwind table: one is to be built.
struct TableNeeded {
  uint32_t tgid = 0;
  as_vma vma{};
};

// A runtime's agent in a process (`agent`: "jvm") says why it does not
// sample what it would.
struct AgentNote {
  uint32_t tgid = 0;
  std::string_view agent;
  std::string text;
};

using Event =
    std::variant<StackEvent, AllocEvent, FreeEvent, ProcessEvent, CgroupEvent, TableNeeded, AgentNote>;

// A record of the kernel's ring buffer as an event; nullopt for one of no
// known kind or too short for its kind.
std::optional<Event> decode_kernel_event(std::span<const uint8_t> data);

// When it happened (CLOCK_MONOTONIC ns), for the kinds that carry a time.
std::optional<uint64_t> event_time(const Event& event);
// The process an event is of (0: none, a cgroup's).
uint32_t event_process(const Event& event);
// About the memory it holds, to bound what waits.
size_t event_bytes(const Event& event);

// The kernel's view of a mapping as /proc's (its dev_t: major in the high
// 12 bits, minor in the low 20).
Mapping kernel_mapping(const as_vma& v);

}  // namespace allocscope

// Every language runtime a recording reads, one line each in registry.cpp:
// the only file of the core that names them. What the layers below take
// from them (their tables of a file, their allocation entry points) is
// handed down from here; the recording tells them all what its event path
// meets, through the set.
#pragma once

#include <sys/types.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "probe/placement/allocator_probes.h"
#include "runtime/runtime.h"
#include "symbols/runtime_tables.h"

namespace allocscope {

class BpfSession;
class Symbolizer;

// The recording's choices a runtime follows.
struct RuntimeSettings {
  uint64_t rate = 0;         // bytes per sample (1: exact)
  bool system_wide = false;  // probes for every process (--all, the agent)
  // What a runtime reads in the processes recorded may be set by allocscope
  // (a Go program's MemProfileRate): -p's processes, a launched command's tree.
  bool writes_processes = false;
  std::set<std::string> off;       // runtimes (by room name) whose heap is left unprobed: --no-go-heap
  std::set<std::string> by_calls;  // ... sampled at every call of their allocator: --go-heap-calls
};

// What a runtime may use of the recording that reads it.
struct RuntimeServices {
  Symbolizer& symbolizer;
  BpfSession* session = nullptr;  // its kernel tables; null in a recording without BPF
  RuntimeSettings settings = {};
};

// Every runtime's reader of its own tables in a file (Symbolizer, unwind tables).
const RuntimeTablesReaders& runtime_tables_readers();
// Every runtime's finder of its allocation entry points (find_allocator_probes).
const EntryFinders& runtime_entry_finders();

class Runtimes {
 public:
  explicit Runtimes(const RuntimeServices& services);
  // None (a recording with no runtime's frames).
  Runtimes() = default;

  // Where their allocations come from (runtime.h says what each does).
  HeapRoute choose_targets(const ProbedFile& file, std::vector<ProbeTarget>& targets,
                           const std::vector<ProbeTarget>& found);
  void on_probed(const ProbedFile& file, const std::vector<ProbeTarget>& attached);
  std::string unprobed_program(uint32_t kernel_dev, uint64_t ino) const;
  bool owns_program(uint32_t kernel_dev, uint64_t ino) const;
  bool reads_heap_of(pid_t pid) const;
  std::vector<pid_t> processes_to_enter(size_t most);
  void recheck(uint64_t now_ms);
  void restore();
  std::vector<std::string> probed_heaps() const;
  uint64_t programs_unread() const;

  // How their frames are named.
  void on_program(pid_t pid, uint32_t kernel_dev, uint64_t ino);
  void on_process(pid_t pid);
  void on_mapping(pid_t pid, uint64_t addr, std::string_view name);
  void on_files(const std::vector<std::string>& paths);
  void forget(pid_t pid);
  void read_stack(pid_t pid, std::span<const Mapping> kernel_maps, std::span<const uint8_t> runtime_part);
  void place_frames(pid_t pid, std::span<const Mapping> kernel_maps, std::span<const uint8_t> runtime_part,
                    uint16_t fn, std::vector<uint64_t>& ips);
  void place_agent_frames(pid_t pid, std::string_view agent, std::span<const uint8_t> frames,
                          std::vector<uint64_t>& ips);
  void on_agent_note(pid_t pid, std::string_view agent, const std::string& text);

  void add_counters(KernelCounters kernel, std::vector<std::pair<std::string, uint64_t>>& out) const;
  std::vector<std::string> warnings(KernelCounters kernel) const;
  std::vector<RuntimePath> paths() const;

 private:
  std::vector<std::unique_ptr<Runtime>> all_;
};

}  // namespace allocscope

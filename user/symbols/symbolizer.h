// Turns user instruction pointers of (possibly exited) processes into
// function names and, where DWARF is present, source lines and inlined calls.
// A return address is first resolved, while its process is known, to the
// mapping that held it (from /proc/PID/maps, or from the kernel's own record
// of the sample's mappings when the process is gone); the mapping outlives
// the process. Each binary is opened once, however many processes map it
// (keyed by device and inode), through elfutils' libdwfl, which also finds
// separate debug files by build id or debuglink (and asks debuginfod only
// when DEBUGINFOD_URLS is set). An open binary stays readable when its file
// is deleted or replaced.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "host/perf_map.h"
#include "host/proc_maps.h"
#include "symbols/runtime_tables.h"
#include "symbols/source_frames.h"

namespace allocscope {

// The name of a signal's return trampoline (between a handler and the code
// the signal interrupted) that no symbol names, as debuggers show it.
inline constexpr const char* kSignalFrame = "[signal handler called]";

// What a return address resolves to.
struct FrameInfo {
  // The function the call is in (the address's symbol): demangled name, or
  // "module+0xvaddr", or "[unknown]".
  std::string function;
  std::string system_name;  // the symbol as in the binary ("" when unresolved)
  // The call's source position, innermost first: with DWARF, one frame per
  // inlined call plus the outer function; without, the outer function alone
  // (no file, line 0). Never empty; back() names `function`.
  std::vector<SourceFrame> frames;
  const Mapping* mapping = nullptr;  // the process's mapping that holds it
  std::string build_id;              // hex, "" when unknown
  std::string runtime;               // the language runtime whose frame it is ("python"); "" native
};

class Symbolizer {
 public:
  // `runtime_tables`: what names a file's code where its symbols and DWARF
  // do not (runtime/registry.h has every runtime's).
  explicit Symbolizer(RuntimeTablesReaders runtime_tables = {});
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  static constexpr uint32_t kNoMapping = UINT32_MAX;

  // Snapshot the process's mappings (once).
  void track(pid_t pid);
  // Re-read the process's mappings now (if it still lives): a snapshot taken
  // right after exec lacks what the dynamic loader maps afterwards. `seen`:
  // mappings the kernel read at sample time; /proc's are taken only if they
  // still hold them (the process may run another program by now).
  void refresh(pid_t pid, std::span<const Mapping> seen = {});
  // Mappings the kernel read at sample time (see struct as_vma), for those
  // the snapshot lacks: the process may be gone before /proc is read.
  void add_mappings(pid_t pid, std::span<const Mapping> kernel_maps);
  // The process ended (exit or exec): its current mappings are dropped;
  // those already resolved to stay.
  void forget(pid_t pid);
  // The process's mappings as last known (empty when never readable).
  const std::vector<Mapping>& maps(pid_t pid);
  // The process's mapping that holds `addr` as last known, without reading
  // /proc again; nullptr when none.
  const Mapping* known_mapping(pid_t pid, uint64_t addr) const {
    auto it = processes_.find(pid);
    return it == processes_.end() ? nullptr : find_mapping(it->second.maps, addr);
  }
  // Resolves return addresses to the mappings that hold them (ids for
  // describe(); kNoMapping when unknown) and opens their binaries, while
  // the process is most likely alive.
  std::vector<uint32_t> resolve(pid_t pid, std::span<const uint64_t> ips);
  // Resolves one address that is not a return address (an entry point).
  uint32_t resolve_address(pid_t pid, uint64_t addr);

  // Keeps the resolved mappings `used` marks (by id), the binaries they or a
  // process still tracked need, and drops the rest: without it, every
  // process a long recording sees leaves its mappings (each at its own
  // addresses) and binaries behind. Returns each old id's new id
  // (kNoMapping: dropped); ids held elsewhere must be rewritten with it.
  std::vector<uint32_t> compact(const std::vector<bool>& used);

  // Resolved mapping `id` moved to an address of its file's own (a base
  // per file, plus the file offset): the same code at the same addresses in
  // every process that maps the file, wherever ASLR placed it; an address a
  // of `id` is a - start + the result's start. Anonymous mappings (JIT
  // code, named per process) stay as they are.
  uint32_t at_file_base(uint32_t id);

  // The function holding return address `ip` of resolved mapping `id`, or
  // the runtime frame `ip` stands for.
  FrameInfo describe(uint32_t mapping, uint64_t ip);

  // A language runtime's frame (`runtime` names it: "python") as a value
  // among a stack's return addresses. Its values lie in the address space's
  // upper half, the kernel's, where no user code is: no mapping resolves
  // one, and describe() names it with its runtime. At most
  // kMaxRuntimeFrames distinct ones; beyond, one per runtime that says the
  // table is full (counted).
  uint64_t runtime_frame(std::string_view runtime, const std::string& function, const std::string& file,
                         int64_t line);
  static constexpr uint64_t kRuntimeFrames = uint64_t{1} << 63;
  static bool is_runtime_frame(uint64_t ip) { return ip >= kRuntimeFrames; }
  static constexpr size_t kMaxRuntimeFrames = size_t{1} << 20;
  uint64_t runtime_frames_full() const { return runtime_frames_full_; }
  // Binaries and debug files whose DWARF was not read: a section of theirs
  // inflates past 2 GiB (in this process, every symbolizer's).
  static uint64_t debug_files_refused();
  const Mapping* mapping(uint32_t id) const { return id < mappings_.size() ? &mappings_[id] : nullptr; }
  // Processes with mappings held, binaries open, mappings resolved.
  size_t processes() const { return processes_.size(); }
  size_t modules() const { return modules_.size(); }
  size_t resolved_mappings() const { return mappings_.size(); }

 private:
  struct Module;
  struct Process {
    std::vector<Mapping> maps;  // sorted by start
  };
  using ModuleKey = std::pair<uint64_t, uint64_t>;  // device, inode

  static ModuleKey key_of(const Mapping& m);
  const Mapping* mapping_for(pid_t pid, uint64_t ip, bool refresh);
  void learn_paths(const std::vector<Mapping>& maps);
  void open_module(pid_t pid, const Mapping& m);
  uint32_t intern(pid_t pid, const Mapping& m);
  void load_perf_map(pid_t pid, uint64_t addr);

  RuntimeTablesReaders runtime_tables_;
  std::unordered_map<pid_t, Process> processes_;
  std::map<ModuleKey, std::unique_ptr<Module>> modules_;
  // Where each file (device, inode) was seen, as a path this process opens.
  std::map<ModuleKey, std::string> paths_;
  std::vector<Mapping> mappings_;  // resolved mappings, by id
  // start, end, offset, inode, and the pid for anonymous mappings (JIT code)
  std::map<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t, pid_t>, uint32_t> mapping_ids_;
  // /tmp/perf-PID.map of processes with anonymous code, by pid while they
  // run and by resolved mapping id after.
  struct PerfMap {
    std::vector<JitSymbol> symbols;
    int64_t size = -1;  // of the file when read
    pid_t own_pid = 0;  // the process's id in its own PID namespace, the file's name (0: not read yet)
  };
  std::unordered_map<pid_t, std::shared_ptr<PerfMap>> perf_maps_;
  std::unordered_map<uint32_t, std::shared_ptr<PerfMap>> jit_;
  // at_file_base()'s bases, 64 GiB apart, while a mapping of the file is held.
  std::map<ModuleKey, uint64_t> file_bases_;
  uint64_t next_file_base_ = 1;
  struct RuntimeFrame {
    SourceFrame frame;
    std::string runtime;
  };
  std::vector<RuntimeFrame> runtime_frames_;  // by runtime_frame()'s value less kRuntimeFrames
  std::map<std::tuple<std::string, std::string, std::string, int64_t>, uint64_t> runtime_ids_;
  uint64_t runtime_frames_full_ = 0;
};

// Where a profile stack came from, known when it was first sampled.
struct StackOrigin {
  uint32_t pid = 0;                // the process id shown; 0 merges processes by name
  uint32_t ns_pid = 0;             // its id in its own PID namespace, when not pid (a container's)
  std::string comm;                // the process's name when sampled
  std::vector<uint32_t> mappings;  // Symbolizer::resolve() of the stack's ips
  uint64_t allocator_addr = 0;     // runtime address of the allocator called, 0 if unknown
  uint32_t allocator_mapping = Symbolizer::kNoMapping;
};

}  // namespace allocscope

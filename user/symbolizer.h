// Turns user instruction pointers of (possibly exited) processes into
// function names and, where DWARF is present, source lines and inlined calls.
// Each process's mappings are snapshotted while it lives; each binary is
// opened once (keyed by device and inode) through elfutils' libdwfl, which
// also finds separate debug files by build id or debuglink (and asks
// debuginfod only when DEBUGINFOD_URLS is set).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "proc_maps.h"
#include "source_frames.h"

namespace allocscope {

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
};

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Snapshot the process's name and mappings (once).
  void track(pid_t pid);
  // Re-read the process's mappings now (if it still lives): a snapshot taken
  // right after exec lacks what the dynamic loader maps afterwards.
  void refresh(pid_t pid);
  // The process's mappings as last read (empty when it was never readable).
  const std::vector<Mapping>& maps(pid_t pid);
  // Make sure every return address in `ips` can be symbolized later, while
  // the process may still be alive: refresh mappings, open binaries.
  void prepare(pid_t pid, std::span<const uint64_t> ips);

  // Name of the function holding return address `ip`: demangled symbol, or
  // "module+0xvaddr", or "[unknown]".
  std::string frame_name(pid_t pid, uint64_t ip);
  FrameInfo describe(pid_t pid, uint64_t ip);
  // The process's mapping that holds `addr`, from the snapshot.
  const Mapping* mapping_at(pid_t pid, uint64_t addr) { return mapping_for(pid, addr, false); }
  std::string comm(pid_t pid) const;

 private:
  struct Module;
  struct Process {
    std::string comm;
    std::vector<Mapping> maps;
  };
  using ModuleKey = std::pair<uint64_t, uint64_t>;  // device, inode

  static ModuleKey key_of(const Mapping& m);
  const Mapping* mapping_for(pid_t pid, uint64_t ip, bool refresh);

  std::unordered_map<pid_t, Process> processes_;
  std::map<ModuleKey, std::unique_ptr<Module>> modules_;
};

std::string demangle(const std::string& name);

}  // namespace allocscope

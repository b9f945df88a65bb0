// CPython's room: Python frames in the stacks of CPython programs. The
// files holding a runtime the kernel is told to walk (their layout, from the
// file: a program, or a library such as libpython3.X.so, whose load bias is
// per process; bpf/python.bpf.h walks them), the code objects their stacks
// name (read from the process, cached per process, checked against reuse),
// and the frames put in place of the evaluation loop's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "allocscope.h"
#include "host/proc_maps.h"
#include "runtime/python/code.h"
#include "runtime/python/program.h"
#include "runtime/registry.h"
#include "runtime/runtime.h"
#include "symbols/elf_file.h"
#include "symbols/symbolizer.h"

namespace allocscope {

struct PythonCounters {
  uint64_t programs = 0;            // files holding a CPython runtime the kernel walks
  uint64_t unsupported = 0;         // ... it cannot (version, build, no symbols, no room)
  uint64_t library_processes = 0;   // processes running CPython from a library, told to the kernel
  uint64_t processes_unwalked = 0;  // ... not told: the kernel's table of them was full
  uint64_t codes_read = 0;          // code objects read
  uint64_t codes_unreadable = 0;    // ... not readable (process gone, object freed)
  uint64_t unplaced = 0;            // frames put at a stack's outer end (no loop frame left for them)
  uint64_t cache_cleared = 0;       // times the code cache reached its bound and started afresh
};

class PythonRuntime : public Runtime {
 public:
  // `publish`: tells the kernel a program file's layout (kernel device, inode).
  using Publish = std::function<bool(uint32_t kernel_dev, uint64_t ino, const as_py_layout&)>;
  // `publish_process`: tells the kernel a process runs CPython from a library.
  using PublishProcess = std::function<bool(pid_t, const as_py_process&)>;
  PythonRuntime(Symbolizer& symbolizer, Publish publish, PublishProcess publish_process);

  // Process `pid` runs the program file (kernel device, inode): if CPython,
  // the kernel walks its Python frames from now on. Read once per file.
  void on_program(pid_t pid, uint32_t kernel_dev, uint64_t ino) override;
  // The same, for a process found running (its /proc/PID/exe), and the
  // CPython libraries it has mapped.
  void on_process(pid_t pid) override;
  // Process `pid` mapped a file not seen before at `addr` (the kernel's
  // vma names it `name`): a CPython library's frames are walked from now
  // on, in it and (by the kernel) in every process that maps it later.
  void on_mapping(pid_t pid, uint64_t addr, std::string_view name) override;
  // Files a launched command will map (its loader's list): CPython
  // libraries among them are walked from the command's first instruction.
  void on_files(const std::vector<std::string>& paths) override;
  // Reads the code objects a stack event's Python frames name while its
  // process lives (its walk may be finished later, when the process is gone).
  void read_stack(pid_t pid, std::span<const Mapping> kernel_maps,
                  std::span<const uint8_t> runtime_part) override;
  // `ips` (native, innermost first) with the event's Python frames in place.
  // `fn`: the sample's entry code (CPython's own allocator's, in process).
  void place_frames(pid_t pid, std::span<const Mapping> kernel_maps, std::span<const uint8_t> runtime_part,
                    uint16_t fn, std::vector<uint64_t>& ips) override;
  // The process ended or runs another program: its code objects go.
  void forget(pid_t pid) override;

  void add_counters(KernelCounters kernel, std::vector<std::pair<std::string, uint64_t>>& out) const override;
  // Why runtimes or processes got no Python frames, and code objects gone
  // before they were read.
  std::vector<std::string> warnings(KernelCounters kernel) const override;
  // The versions walked, the processes whose small objects are not in the
  // figures (sampled through the C library only), and the refusals.
  std::vector<RuntimePath> paths() const override;

  const PythonCounters& counters() const { return counters_; }

 private:
  struct Program {
    PythonProgram layout;
    std::vector<ElfFile::Segment> segments;
  };
  using FileKey = std::pair<uint32_t, uint64_t>;  // kernel device, inode
  struct Found {
    const Program* program = nullptr;
    uint64_t bias = 0;  // runtime address less virtual address
  };
  // A code object's name, file and lines; nullopt: unreadable.
  using Code = std::optional<PythonCode>;

  const Program* learn(const FileKey& key, const std::string& path, const std::string& shown);
  const Program* learn_library(const std::string& path, const std::string& shown);
  void refuse(const std::string& shown, const std::string& version, const std::string& why);
  void from_library(pid_t pid, const Mapping& m);
  Found find_program(pid_t pid, std::span<const Mapping> kernel_maps);
  Found from_process(pid_t pid);
  const Code& code(pid_t pid, const Found& found, const as_py_frame& frame);
  void place(pid_t pid, std::span<const Mapping> kernel_maps, std::span<const as_py_frame> frames,
             uint64_t ends, uint16_t fn, std::vector<uint64_t>& ips);

  Symbolizer& symbolizer_;
  Publish publish_;
  PublishProcess publish_process_;
  std::map<FileKey, std::unique_ptr<Program>> programs_;  // nullptr: not CPython, or not walkable
  static constexpr size_t kMaxPrograms = 256;             // the kernel's python_files
  static constexpr size_t kMaxCodes = size_t{1} << 18;    // code objects cached, all processes
  std::unordered_map<pid_t, std::map<std::pair<uint64_t, uint32_t>, Code>> codes_;  // by address, stamp
  // Each process's CPython program, as found: its executable's mappings may
  // name another file (overlayfs maps the file below), so it is found by the
  // executable and the kernel's start of code rather than by its mappings.
  std::unordered_map<pid_t, Found> processes_;
  size_t cached_ = 0;
  std::set<std::string> versions_;               // of the programs whose frames were placed
  std::unordered_map<pid_t, bool> in_domain_;    // processes with Python frames: CPython's allocator counted
  static constexpr size_t kMaxProcesses = 4096;  // in_domain_'s bound (beyond: not told apart)
  PythonCounters counters_;
  std::vector<std::string> refusals_;
};

// CPython's room as the registry makes it: none without a BPF session (the
// kernel walks its frames).
std::unique_ptr<Runtime> make_python_runtime(const RuntimeServices& services);

}  // namespace allocscope

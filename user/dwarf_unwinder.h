// Unwinds a copy of a thread's user stack with the call frame information
// (.eh_frame, else .debug_frame) of the binaries it runs, through elfutils'
// libdwfl, as perf's --call-graph dwarf does. Frame pointers are not needed.
//
// The kernel side copies, at a sampled allocator's return, the user registers
// and the top of the user stack; nothing else of the process is read: stack
// reads are served from the copy, reads of a binary's read-only segments from
// its file, and every other read fails, which ends the unwind there.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "proc_maps.h"

namespace allocscope {

// x86-64 DWARF register numbers (System V psABI, figure 3.36), the order of
// StackSnapshot::regs. From the kernel's struct pt_regs:
//   0 ax  1 dx  2 cx  3 bx  4 si  5 di  6 bp  7 sp  8..15 r8..r15  16 ip
enum DwarfReg : unsigned {
  kRegRax = 0, kRegRdx = 1, kRegRcx = 2, kRegRbx = 3, kRegRsi = 4, kRegRdi = 5, kRegRbp = 6, kRegRsp = 7,
  kRegR8 = 8, kRegR9 = 9, kRegR10 = 10, kRegR11 = 11, kRegR12 = 12, kRegR13 = 13, kRegR14 = 14,
  kRegR15 = 15, kRegRip = 16,
  kDwarfRegCount = 17,
};

// What the kernel copies on a sampled call.
struct StackSnapshot {
  // The user registers in DWARF order (DwarfReg). At an allocator's return
  // (uretprobe) they are the caller's: rip is the return address into the
  // caller, rsp the caller's stack pointer after the return, rbx, rbp and
  // r12..r15 the caller's callee-saved values. Only rip, rsp and the
  // registers the CFI of the unwound frames refers to (in practice rbp, rbx,
  // r12..r15) are used; the caller-saved ones may be zero.
  uint64_t regs[kDwarfRegCount] = {};
  uint64_t sp = 0;                 // user address of stack[0], normally regs[kRegRsp]
  std::span<const uint8_t> stack;  // stack bytes from sp upwards, as copied
};

struct UnwindResult {
  // ips[0] is regs[kRegRip] as captured; each later entry is where the frame
  // above will continue: a return address, unless activation[i] says the
  // frame was interrupted there (by a signal).
  std::vector<uint64_t> ips;
  // 1 where ips[i] is the exact address of an interrupted instruction (frame
  // 0, frames a signal interrupted), 0 where it is a return address. To name
  // the calling line look up ips[i] - 1 where 0 and ips[i] where 1. A snapshot
  // taken at an allocator's return is the exception for frame 0: ips[0] is
  // then the allocator's return address, so ips[0] - 1 is the call site,
  // which is why the Symbolizer's "every ip is a return address" is right for
  // these stacks.
  std::vector<uint8_t> activation;
  bool truncated = false;   // stopped before the outermost frame
  std::string stop_reason;  // why it stopped early; "" when not truncated
};

// Not thread-safe: one instance per thread that unwinds.
class DwarfUnwinder {
 public:
  // A path under which this process can open the file behind a mapping of
  // process pid (default: /proc/PID/map_files/..., which also works for
  // deleted binaries and other mount namespaces, else /proc/PID/root/PATH).
  using PathFor = std::function<std::string(pid_t, const Mapping&)>;

  explicit DwarfUnwinder(PathFor path_for = {});
  ~DwarfUnwinder();
  DwarfUnwinder(const DwarfUnwinder&) = delete;
  DwarfUnwinder& operator=(const DwarfUnwinder&) = delete;

  // Unwinds `snap`, a stack of a thread of process `pid` (the thread group
  // id) whose mappings are `maps` (sorted by start, as parse_maps returns
  // them; pcs in code mapped after that snapshot end the unwind, "is in no
  // mapping": re-read the maps and retry). The process's libdwfl session is
  // kept between calls and updated when its executable file mappings change
  // (compared through a fingerprint of them, O(mappings) per call); binaries
  // are opened once for all processes, by device and inode. At most
  // max_frames entries are returned (more means truncated).
  UnwindResult unwind(pid_t pid, const std::vector<Mapping>& maps, const StackSnapshot& snap,
                      size_t max_frames = 127);

  // Drops what is kept for a process (call when it exits).
  void forget(pid_t pid);

  size_t cached_processes() const { return processes_.size(); }
  size_t cached_files() const { return files_.size(); }

  // Defined in dwarf_unwinder.cpp, where libdwfl's callbacks reach them.
  struct File;
  struct Process;

 private:
  using FileKey = std::pair<uint64_t, uint64_t>;  // device, inode

  Process* process_for(pid_t pid, const std::vector<Mapping>& maps);
  void report_modules(pid_t pid, Process& p, const std::vector<Mapping>& maps);
  std::shared_ptr<File> file_for(pid_t pid, const Mapping& m);
  void evict_oldest_process();
  void prune_files();

  PathFor path_for_;
  std::unordered_map<pid_t, std::unique_ptr<Process>> processes_;
  std::map<FileKey, std::shared_ptr<File>> files_;
  uint64_t clock_ = 0;
};

}  // namespace allocscope

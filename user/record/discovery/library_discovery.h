// The allocators probed: every ELF object a traced process maps that defines
// allocator entry points (the C library, a preloaded or linked jemalloc,
// tcmalloc or mimalloc, a static executable's own malloc), the targets', every
// running process's (--all), and those that processes map later, looked for
// again until /proc shows them; or a file that samples in process (the
// preload library, an otel_memory provider), through its USDT probes instead
// of the uprobes of the allocator behind it. Each file is read once. Knows
// where each allocator's entry points are, for the leaf frame of every stack.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "allocscope.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "host/proc_maps.h"
#include "inject/breakpoints.h"
#include "probe/session/bpf_session.h"
#include "record/events/sink_hooks.h"
#include "record/record.h"
#include "runtime/registry.h"
#include "symbols/symbolizer.h"

namespace allocscope {

// How files that sample in process (their USDT probes) and allocators share
// the work: Alongside, a process that maps such a file is sampled by it and
// every allocator is probed; Only, nothing but such files is probed (a
// command launched with --preload); Preferred, an allocator is probed only
// once a process that samples no other way maps it (a launched command's
// tree, started with the preload library: until then its processes trap
// into the kernel only for sampled allocations).
enum class InProcessUse { Alongside, Only, Preferred };

class LibraryDiscovery : public LibraryWatch {
 public:
  // `runtimes`: the language runtimes, which choose among their own entry
  // points in the files probed.
  LibraryDiscovery(const RecordConfig& config, InProcessUse use, BpfSession& session, Symbolizer& symbolizer,
                   Runtimes& runtimes);

  // Probes every allocator process `pid` maps; fails when it maps none.
  // `entered`: allocscope loaded its library into the process, which
  // samples through it (else a copy left by another recording sleeps).
  Result<void> attach_process(pid_t pid, bool entered = false);
  // The in-process probes of the library loaded into process `pid` (its
  // file open at `library`), attached before it samples: under system-wide
  // probes, for every process that maps it (its forks). The process is not
  // marked as sampling itself (BpfSession::mark_in_process): its caller's.
  Result<void> attach_entered(pid_t pid, int library);
  // Copies of the library that entries loaded whose processes (the entered
  // one and its forks) all ended or ran another program: their probes
  // detached and their files let go, so that an always-on recording keeps
  // only its live entries'. Once a second.
  void release_unmapped_copies();
  // Whether process `pid` maps a file that samples in process (the preload
  // library, another otel_memory provider): then nothing is loaded into it.
  bool samples_in_process(pid_t pid) const;
  // A launched command's files (program, libraries, preloads), probed
  // before it runs in process `pid` (held before exec): no allocation is
  // missed while a new mapping would be noticed. `in_process`: the program
  // will sample in process (Preferred leaves its allocators unprobed).
  void attach_paths(pid_t pid, const std::vector<std::string>& paths, bool in_process);
  // --all: every distinct allocator file that a running process maps
  // (containers and chroots bring their own); later ones come as mmap events.
  Result<void> attach_every_process();
  // Looks again for libraries announced before /proc showed them.
  void retry_pending(uint64_t now_ms);
  bool has_pending() const { return !pending_.empty(); }

  size_t libraries_probed() const { return allocator_offsets_.size() + in_process_files_.size(); }
  bool in_process_probed() const { return !in_process_files_.empty(); }
  // Allocators left unprobed (Preferred) while their processes sample in process.
  size_t allocators_deferred() const { return deferred_.size(); }
  // Library files that could not be probed, or vanished before they could.
  uint64_t libraries_missed() const { return libraries_missed_; }
  // The first few of them, each with its reason.
  const std::vector<std::string>& missed_names() const { return missed_names_; }
  // Static programs run by traced processes that define no allocator
  // allocscope knows (stripped ones), and the first few of their paths.
  uint64_t without_allocator() const { return without_allocator_; }
  const std::vector<std::string>& without_allocator_names() const { return without_allocator_names_; }

  // System-wide: each allocator file probed, with its probes' sites and
  // the bytes their int3s replaced (read once per file), for an entered
  // process to take them out of its copy (inject/breakpoints.h).
  const std::vector<inject::ProbedFile>& probed_files();
  // How many allocator files were probed system-wide so far: when it grows,
  // entered processes take the new probes out.
  size_t files_probed_system_wide() const { return system_wide_ ? probed_targets_.size() : 0; }

  void new_library(const as_proc_event& e) override;
  void on_exec(uint32_t tgid) override;
  void on_fork(uint32_t parent, uint32_t child) override;
  void on_program_end(uint32_t tgid) override;
  uint64_t allocator_address(uint32_t tgid, int fn) override;

 private:
  using FileKey = std::pair<uint64_t, uint64_t>;  // device, inode

  // A file mapped by a process that announced it (AS_EV_MMAP) before
  // /proc showed the mapping: looked for again until the deadline.
  struct PendingLibrary {
    uint32_t tgid;
    uint64_t addr;        // where it was mapped; 0: any mapping of `key`
    FileKey key;          // the file as the kernel's vma names it (overlayfs: the backing file)
    uint32_t kernel_dev;  // ... in the kernel's encoding, to report it again if it is given up
    uint64_t deadline_ms;
    uint64_t mapped_ns;  // when the process mapped it (CLOCK_MONOTONIC)
    std::string name;    // its name, for a warning
  };
  static constexpr size_t kMissedNamed = 8;

  static FileKey file_key(const Mapping& m);
  static FileKey file_key(const struct stat& st);
  static FileKey file_key(uint32_t kernel_dev, uint64_t ino);
  static uint32_t kernel_dev(const FileKey& key);
  // Probes the file of mapping `m` if it is an allocator: true when it is
  // (or was already) probed, false when it is no allocator.
  Result<bool> attach_file(pid_t pid, const Mapping& m);
  // `assume_in_process`: the process will sample in process (it has not run yet).
  Result<bool> attach_file(pid_t pid, FileKey key, const std::string& path, const std::string& shown,
                           bool assume_in_process = false);
  Result<bool> attach_held(pid_t pid, FileKey key, const std::string& path, const std::string& shown,
                           bool assume_in_process);
  static Result<UniqueFd> hold(pid_t pid, const std::string& path, const std::string& shown);
  static std::string held_path(const UniqueFd& file);
  // Probes the in-process sampling probes of the file (`elf`, opened once
  // for this and its allocator symbols) if it has them.
  class LazyElf;
  Result<bool> attach_in_process(pid_t pid, FileKey key, const std::string& path, const std::string& shown,
                                 LazyElf& elf);
  // Preferred: whether process `pid`'s allocators are left to its own sampler.
  bool defers_for(pid_t pid, bool assume_in_process) const;
  // Whether `p` is settled (probed, failed or given up), or still awaited.
  bool settle(const PendingLibrary& p, uint64_t now_ms);
  void attach_pending(const PendingLibrary& p, const Mapping& m);
  void give_up(const PendingLibrary& p, const std::string& why);
  void miss(const std::string& name, const std::string& why);

  BpfSession& session_;
  Symbolizer& symbolizer_;
  Runtimes& runtimes_;
  bool system_wide_, naive_placement_, verbose_;
  InProcessUse use_;
  size_t max_files_;
  bool warned_full_ = false;
  std::map<FileKey, std::map<uint16_t, uint64_t>> allocator_offsets_;  // entry code -> file offset, per file
  std::set<FileKey> not_allocators_;        // files whose symbols define no allocator
  std::set<FileKey> in_process_files_;      // files whose in-process probes are attached
  std::set<FileKey> no_in_process_probes_;  // files read and found without them
  std::set<FileKey> deferred_;              // allocators whose probes wait (Preferred)
  std::map<FileKey, UniqueFd>
      held_files_;  // the files probed, open: attached again by fd (never by a pid's path)
  FileKey own_executable_{};
  std::vector<PendingLibrary> pending_;
  uint64_t libraries_missed_ = 0;
  std::vector<std::string> missed_names_;
  uint64_t without_allocator_ = 0;
  std::vector<std::string> without_allocator_names_;
  std::map<FileKey, std::vector<ProbeTarget>> probed_targets_;  // as found, before a runtime's choice
  std::vector<inject::ProbedFile> probed_files_;                // probed_files(), for the files in
  std::set<FileKey> files_with_sites_;                          // ... these
  // Each entered copy's processes; a process maps one copy at most.
  void leave_copy(pid_t pid);  // process `pid` maps no entered copy now
  std::map<FileKey, std::set<pid_t>> copy_users_;
  std::map<pid_t, FileKey> copy_of_;
};

}  // namespace allocscope
